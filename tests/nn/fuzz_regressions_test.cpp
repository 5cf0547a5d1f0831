// Inputs the fuzz targets (fuzz/, tools/fuzz) found crashing or misleading an nn reader, kept
// under tests/nn/regressions/<target>/ and replayed the way the target reads them: safetensors
// through nn::load, checkpoints through load_training_checkpoint into the target's setups
// (fuzz/checkpoint_nets.h). Each must now be refused with the qflow::Error that names the file
// and the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "../../fuzz/checkpoint_nets.h"
#include "qflow/nn/checkpoint.h"
#include "qflow/nn/serialize.h"
#include "error_of.h"

using namespace qflow;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const fs::path kRegressions = fs::path(QFLOW_SOURCE_DIR) / "tests" / "nn" / "regressions";

struct Case {
  const char* target;   // the fuzz target (and folder) that found it
  const char* file;
  bool adam;            // checkpoint: the setup that accepted the bad state (Adam, else SGD)
  const char* message;  // what the error must say after "'<path>'"
};

const Case kCases[] = {
    // A renamed Adam buffer loaded; the next step() met an undefined exp_avg.
    {"checkpoint", "adam-unknown-buffer-name.safetensors", true,
     "': the optimizer state does not fit: optimizer.load_state_dict: unknown entry 'state.5.expWavg' (this optimizer "
     "keeps exp_avg, exp_avg_sq, step)"},
};

using ::qflow::testing_util::error_of;  // tests/error_of.h

TEST(NnFuzzRegressionsTest, EveryInputIsRefusedWithAQflowError) {
  for (const Case& c : kCases) {
    const std::string path = (kRegressions / c.target / c.file).string();
    ASSERT_TRUE(fs::exists(path)) << path;
    std::string message;
    if (std::string(c.target) == "safetensors") {
      message = error_of([&] { nn::load(path); });
    } else {
      fuzz::TrainingSetup setup(c.adam);
      std::map<std::string, std::vector<double>> before;
      for (const auto& [k, v] : setup.net->state_dict()) before[k] = to_vector<double>(v.to(DType::Float64));
      message = error_of([&] { nn::load_training_checkpoint(path, *setup.net, *setup.opt, setup.sched.get()); });
      for (const auto& [k, v] : setup.net->state_dict())  // the failed load changed nothing
        EXPECT_EQ(to_vector<double>(v.to(DType::Float64)), before[k]) << k;
    }
    EXPECT_THAT(message, HasSubstr("'" + path + c.message)) << path;
  }
}

TEST(NnFuzzRegressionsTest, EveryFileIsListed) {
  for (const auto& target : fs::directory_iterator(kRegressions))
    for (const auto& file : fs::directory_iterator(target.path())) {
      const std::string t = target.path().filename().string(), f = file.path().filename().string();
      EXPECT_TRUE(std::any_of(std::begin(kCases), std::end(kCases), [&](const Case& c) { return t == c.target && f == c.file; }))
          << "tests/nn/regressions/" << t << "/" << f << " is not in kCases";
    }
}

}  // namespace
