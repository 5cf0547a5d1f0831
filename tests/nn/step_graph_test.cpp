// What a machine without a GPU says about graphs (Note [Captured device work], Note [Step
// graphs]); capture and replay themselves are tested on a GPU (tests/cuda/graph_test.cpp).
#include <gtest/gtest.h>

#include "qflow/core/device_graph.h"
#include "qflow/core/device_runtime.h"
#include "qflow/nn/step_graph.h"
#include "qflow/qflow.h"
#include "error_of.h"

namespace qflow {
namespace {

using testing_util::error_of;

TEST(StepGraphTest, TheCpuHasNoGraphsAndSaysSo) {
  const std::string m = error_of([] { (void)capture_graph(Device::cpu(), [] {}); });
  EXPECT_NE(m.find("the cpu has no graphs"), std::string::npos) << m;
  const std::string s =
      error_of([] { nn::StepGraph step(Device::cpu(), [](const std::vector<Tensor>& in) { return in; }); });
  EXPECT_NE(s.find("the cpu cannot capture graphs"), std::string::npos) << s;
}

TEST(StepGraphTest, ACudaGraphWithoutAUsableGpuSaysWhy) {
  if (device_count(DeviceType::CUDA) > 0) GTEST_SKIP() << "this machine has a GPU: tests/cuda covers it";
  const std::string m = error_of([] { (void)capture_graph(Device::cuda(0), [] {}); });
  EXPECT_FALSE(m.empty());
  EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
}

TEST(StepGraphTest, BadOptionsAreRefused) {
  const std::string m = error_of([] {
    nn::StepGraph step(Device::cuda(0), [](const std::vector<Tensor>& in) { return in; }, {.warmup = -1});
  });
  EXPECT_NE(m.find("warmup must be >= 0"), std::string::npos) << m;
  const std::string f = error_of([] { nn::StepGraph step(Device::cuda(0), nullptr); });
  EXPECT_NE(f.find("no function"), std::string::npos) << f;
}

// The record of in-place writes that replays repeat (Note [Versions of captured writes]).
TEST(StepGraphTest, VersionBumpsAreRecordedOncePerStorageAndReplayedOnLiveStoragesOnly) {
  std::vector<std::weak_ptr<Storage>> written;
  Tensor a = zeros({4}), b = zeros({4});
  uint64_t a0 = 0, b0 = 0;
  {
    Tensor dead = zeros({4});
    auto* previous = detail::record_version_bumps(&written);
    a.add_(1.0);
    a.add_(1.0);
    b.mul_(2.0);
    dead.add_(1.0);
    detail::record_version_bumps(previous);
    a0 = a.version();
    b0 = b.version();
  }
  EXPECT_GE(written.size(), 4u);
  detail::deduplicate(written);
  EXPECT_EQ(written.size(), 2u) << "a and b once each; the dead tensor's storage is dropped";
  detail::bump_versions(written);
  EXPECT_EQ(a.version(), a0 + 1);
  EXPECT_EQ(b.version(), b0 + 1);
  Tensor c = zeros({4});
  c.add_(1.0);  // nothing records outside a capture
  EXPECT_EQ(written.size(), 2u);
}

}  // namespace
}  // namespace qflow
