// The process-wide convolution engine and algorithm settings (declared in conv_ops.h).
#include <atomic>
#include <cstdlib>

#include "qflow/core/conv_ops.h"
#include "qflow/core/error.h"

namespace qflow {
namespace {

template <typename E>
E from_env(const char* var, E fallback, E (*parse)(std::string_view)) {
  const char* v = std::getenv(var);
  return v && *v ? parse(v) : fallback;
}

std::atomic<ConvEngine>& engine_setting() {
  static std::atomic<ConvEngine> e{from_env("QFLOW_CONV_ENGINE", ConvEngine::OneDNN, parse_conv_engine)};
  return e;
}

std::atomic<ConvAlgorithm>& algorithm_setting() {
  static std::atomic<ConvAlgorithm> a{from_env("QFLOW_CONV_ALGO", ConvAlgorithm::Auto, parse_conv_algorithm)};
  return a;
}

std::atomic<bool>& keep_blocked_setting() {
  static std::atomic<bool> k{[] {
    const char* v = std::getenv("QFLOW_BLOCKED_LAYOUT");
    if (!v || !*v) return true;
    const std::string_view s(v);
    QFLOW_CHECK(s == "0" || s == "1", "QFLOW_BLOCKED_LAYOUT must be 0 or 1, got '{}'", s);
    return s == "1";
  }()};
  return k;
}

std::atomic<uint64_t> settings_reads{0};

}  // namespace

uint64_t conv_settings_reads() { return settings_reads.load(std::memory_order_relaxed); }

void set_conv_keeps_blocked_layout(bool keep) { keep_blocked_setting().store(keep); }
bool conv_keeps_blocked_layout() { return keep_blocked_setting().load(std::memory_order_relaxed); }

void set_conv_engine(ConvEngine engine) { engine_setting().store(engine); }
ConvEngine conv_engine() {
  settings_reads.fetch_add(1, std::memory_order_relaxed);
  return engine_setting().load(std::memory_order_relaxed);
}
void set_conv_algorithm(ConvAlgorithm algorithm) { algorithm_setting().store(algorithm); }
ConvAlgorithm conv_algorithm() {
  settings_reads.fetch_add(1, std::memory_order_relaxed);
  return algorithm_setting().load(std::memory_order_relaxed);
}

const char* to_string(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::Direct: return "direct";
    case ConvAlgorithm::Winograd: return "winograd";
    default: return "auto";
  }
}

const char* to_string(ConvEngine e) { return e == ConvEngine::OneDNN ? "onednn" : "im2col"; }

ConvAlgorithm parse_conv_algorithm(std::string_view name) {
  if (name == "auto") return ConvAlgorithm::Auto;
  if (name == "direct") return ConvAlgorithm::Direct;
  if (name == "winograd") return ConvAlgorithm::Winograd;
  QFLOW_CHECK(false, "unknown convolution algorithm '{}': expected auto, direct or winograd", name);
  return ConvAlgorithm::Auto;
}

ConvEngine parse_conv_engine(std::string_view name) {
  if (name == "onednn") return ConvEngine::OneDNN;
  if (name == "im2col") return ConvEngine::Im2col;
  QFLOW_CHECK(false, "unknown convolution engine '{}': expected onednn or im2col", name);
  return ConvEngine::OneDNN;
}

ConvSettingsGuard::ConvSettingsGuard(ConvEngine engine, ConvAlgorithm algorithm)
    : engine_(engine_setting().load()), algorithm_(algorithm_setting().load()) {  // saving is not a read
  set_conv_engine(engine);
  set_conv_algorithm(algorithm);
}

ConvSettingsGuard::~ConvSettingsGuard() {
  set_conv_engine(engine_);
  set_conv_algorithm(algorithm_);
}

}  // namespace qflow
