#include "qflow/core/error.h"

namespace qflow {

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(fmt::format("{} ({}:{})", message, file, line)), message_(std::move(message)) {}

namespace detail {

void throw_error(const char* file, int line, std::string message) {
  throw Error(std::move(message), file, line);
}

void throw_assert(const char* file, int line, const char* cond, std::string message) {
  throw Error(fmt::format("internal assert failed: {} — {} (this is a qflow bug)", cond, message), file, line);
}

}  // namespace detail
}  // namespace qflow
