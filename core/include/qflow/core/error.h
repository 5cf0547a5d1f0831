#pragma once
// Errors: QFLOW_CHECK for user mistakes, QFLOW_ASSERT for internal invariants.
//
// Note [Errors]
// Every user mistake (bad shape, bad dim, wrong dtype, out-of-range index) throws
// qflow::Error with the source location and a message that names the op and the offending
// values. The message is formatted with fmt only when the check fails, so checks cost one
// branch on the hot path. Library code never exits or aborts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace qflow {

/// The one exception type of qflow. `what()` is "message (file:line)"; `message()` is the
/// message alone, which is what tests compare against.
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line);
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, std::string message);
[[noreturn]] void throw_assert(const char* file, int line, const char* cond, std::string message);
}  // namespace detail

}  // namespace qflow

/// QFLOW_CHECK(cond, "fmt {}", args...): throws qflow::Error when cond is false.
#define QFLOW_CHECK(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) [[unlikely]]                                                         \
      ::qflow::detail::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__));   \
  } while (0)

/// QFLOW_ASSERT(cond, "fmt", ...): an internal invariant; a failure is a qflow bug.
#define QFLOW_ASSERT(cond, ...)                                                              \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::qflow::detail::throw_assert(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

/// QFLOW_FAIL("fmt", ...): unconditional user error.
#define QFLOW_FAIL(...) ::qflow::detail::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
