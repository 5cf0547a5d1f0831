// Linked into every test executable: fails the run when a test reads the convolution settings
// but its suite is not registered with the engine variants.
//
// Note [Engine variants of the tests]
// ctest runs the suites whose results depend on the convolution engine three times: as they are
// (oneDNN, its automatic algorithm), as `im2col:` (QFLOW_CONV_ENGINE=im2col: im2col + OpenBLAS)
// and as `direct:` (QFLOW_CONV_ALGO=direct: oneDNN without Winograd). Running every suite three
// times tripled the entries (3,425 for ~1,100 distinct tests) for the ~60 % that never compute a
// convolution. A computation depends on the engine only through conv_engine() and
// conv_algorithm(); core counts their reads (conv_settings_reads). tests/CMakeLists.txt names,
// per layer, the suites registered with the variants (a gtest filter, QFLOW_ENGINE_SUITES here);
// this listener fails any test outside them whose run read the settings, naming the suite to add,
// so a new convolution test cannot silently lose its variants. What it cannot see: convolutions
// in child processes (the tools tests run qflow-train; the engines' agreement is the kernels'
// business, proved in-process by the core, nn, quant and onnx suites).
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "qflow/core/conv_ops.h"

#ifndef QFLOW_ENGINE_SUITES
#error "tests/CMakeLists.txt defines QFLOW_ENGINE_SUITES (a gtest filter of the engine-dependent suites)"
#endif

namespace {

// Whether "Suite.Test" matches one of the ':'-separated glob patterns (gtest's positive filter).
bool matches_filter(const std::string& name, const std::string& filter) {
  std::stringstream patterns(filter);
  std::string pattern;
  while (std::getline(patterns, pattern, ':'))
    if (!pattern.empty() && fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

class EngineReadsListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { reads_at_start_ = qflow::conv_settings_reads(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    if (qflow::conv_settings_reads() != reads_at_start_ && !matches_filter(name, QFLOW_ENGINE_SUITES))
      unregistered_.push_back(name);
  }
  const std::vector<std::string>& unregistered() const { return unregistered_; }

 private:
  uint64_t reads_at_start_ = 0;
  std::vector<std::string> unregistered_;
};

EngineReadsListener* listener = nullptr;

// A failure in an environment's TearDown fails the run (RUN_ALL_TESTS returns 1), and ctest runs
// one test per process: the offending test's entry fails.
class EngineVariantsCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& name : listener->unregistered())
      ADD_FAILURE() << name << " computed a convolution (it read conv_engine()/conv_algorithm()), but its suite is "
                    << "not among the engine-dependent suites of tests/CMakeLists.txt (" << QFLOW_ENGINE_SUITES
                    << "): add it there so ctest also runs it as im2col: and direct: (Note [Engine variants of the "
                       "tests])";
  }
};

[[maybe_unused]] const bool registered = [] {
  listener = new EngineReadsListener;  // gtest owns listeners and environments
  ::testing::UnitTest::GetInstance()->listeners().Append(listener);
  ::testing::AddGlobalTestEnvironment(new EngineVariantsCheck);
  return true;
}();

}  // namespace
