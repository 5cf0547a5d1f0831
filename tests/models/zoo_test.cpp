// The zoo against its PyTorch definitions: same state_dict keys and shapes, same outputs for
// the same weights in eval and train mode, same loss and parameter gradients (weights exchanged
// through safetensors).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "compare.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

bool python_with_torch() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return ok;
}

std::string golden_dir(const std::string& model) {
  const auto dir = std::filesystem::temp_directory_path() / ("qflow_zoo_" + model + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cmd = "/usr/bin/python3 " QFLOW_SOURCE_DIR "/tests/golden/zoo_golden.py " + model + " " + dir.string();
  QFLOW_CHECK(std::system(cmd.c_str()) == 0, "golden script failed: {}", cmd);
  return dir.string();
}

// PyTorch's values are recorded: NaN or Inf fails where they are finite (tests/compare.h).
void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ASSERT_EQ(got.sizes(), want.sizes());
  testing_util::expect_all_close(got, want, rtol, atol, testing_util::NonFinite::kMustMatch);
}

// `golden` names the case in zoo_golden.py, `name` the model in the registry.
void check_against_pytorch(const std::string& golden, const std::string& name, const models::ModelOptions& opts) {
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  const std::string dir = golden_dir(golden);
  auto model = models::create(name, opts);
  model->load_state_dict(nn::load(dir + "/weights.safetensors"));  // strict: keys and shapes equal PyTorch's
  const nn::StateDict io = nn::load(dir + "/io.safetensors");
  const Tensor x = io.at("input");
  model->eval();
  {
    NoGradGuard no_grad;
    expect_close((*model)(x), io.at("out_eval"), 1e-4, 1e-5);
  }
  model->train();
  {
    NoGradGuard no_grad;
    expect_close((*model)(x), io.at("out_train"), 1e-4, 1e-5);
  }
  for (const auto& [key, t] : model->state_dict())
    if (is_floating(t.dtype())) expect_close(t, io.at("after." + key), 1e-5, 1e-6);
  // Backward in float64 (see zoo_golden.py: in float32 a batch of 3 makes the first layers'
  // gradients uncertain to ~0.3 % of their scale in PyTorch as well).
  model->to(DType::Float64);
  Tensor loss = F::cross_entropy((*model)(x.to(DType::Float64)), io.at("labels"));
  expect_close(loss.detach(), io.at("loss"), 1e-10, 1e-12);
  loss.backward();
  for (const auto& [key, p] : model->named_parameters()) {
    SCOPED_TRACE("grad of " + key);
    const Tensor want = io.at("grad." + key);
    expect_close(p.grad(), want, 1e-7, 1e-9 * want.abs().max().item<double>());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

TEST(ZooTest, ResNet18MatchesPyTorchInEvalAndTrainModeAndBackward) { check_against_pytorch("resnet18", "resnet18", {}); }

TEST(ZooTest, ResNet18OnFashionMnistSizedInputMatchesPyTorchAndBackward) {
  check_against_pytorch("resnet18_gray28", "resnet18", {.num_classes = 10, .in_channels = 1, .image_size = 28});
}

TEST(ZooTest, LeNet5OnMnistSizedInputMatchesPyTorch) {
  check_against_pytorch("lenet5", "lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
}

TEST(ZooTest, ResNet18StateDictKeysFollowThePyTorchDefinition) {
  auto model = models::resnet18();
  const auto sd = model->state_dict();
  EXPECT_TRUE(sd.contains("conv1.weight"));
  EXPECT_TRUE(sd.contains("layer1.0.bn2.running_var"));
  EXPECT_TRUE(sd.contains("layer2.0.shortcut.0.weight"));
  EXPECT_TRUE(sd.contains("layer4.0.shortcut.1.num_batches_tracked"));
  EXPECT_FALSE(sd.contains("layer1.0.shortcut.0.weight"));
  EXPECT_EQ(sd.at("linear.weight").sizes(), (std::vector<int64_t>{10, 512}));
  int64_t params = 0;
  for (const Tensor& p : model->parameters()) params += p.numel();
  EXPECT_EQ(params, 11173962);  // the CIFAR ResNet18's well-known parameter count
}

TEST(ZooTest, EveryModelRunsForwardAndBackwardOnBothImageSizes) {
  for (const auto& name : models::model_names()) {
    for (int64_t size : {28, 32}) {
      if (name == "resnet50" || name == "resnet34") continue;  // same code paths as resnet18, slow
      auto model = models::create(name, {.num_classes = 7, .in_channels = size == 28 ? 1 : 3, .image_size = size});
      Tensor x = randn({2, size == 28 ? 1 : 3, size, size});
      Tensor y = (*model)(x);
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 7})) << name << " " << size;
      y.sum().backward();
      for (const auto& [n, p] : model->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name << " " << n;
    }
  }
}

TEST(ZooTest, UnknownModelListsTheKnownOnes) {
  try {
    models::create("resnet19");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("unknown model 'resnet19' (known: alexnet, lenet5, mobilenet_v2, resnet18, resnet34, resnet50)"));
  }
}
