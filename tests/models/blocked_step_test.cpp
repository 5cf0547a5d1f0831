// A ResNet18 training step with activations kept in oneDNN's blocked layout from layer to
// layer (Note [Opaque layouts]): how many layout conversions a step makes, and that the step
// computes what the plain-layout step computes.
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

struct StepResult {
  float loss = 0;
  std::vector<Tensor> grads;
  int64_t conversions = 0;  // in the second step, when every cache is warm
};

StepResult train_two_steps(bool keep_blocked) {
  set_conv_keeps_blocked_layout(keep_blocked);
  manual_seed(0);
  auto model = models::resnet18();
  model->train();
  const Tensor images = randn({4, 3, 32, 32});
  const Tensor labels = from_vector<int64_t>({1, 7, 3, 0});
  StepResult r;
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    reset_layout_conversion_count();
    Tensor loss = F::cross_entropy((*model)(images), labels);
    loss.backward();
    r.conversions = layout_conversion_count();
    r.loss = loss.item<float>();
  }
  for (const Tensor& p : model->parameters()) r.grads.push_back(p.grad());
  set_conv_keeps_blocked_layout(true);
  return r;
}

// Note [Conversions in a ResNet18 step]
// With the blocked layout kept, a steady-state training step converts only where the model
// meets plain tensors: the input images into conv1's layout (forward, and again for conv1's
// weight gradient), the last block's output into the classifier's plain average pool, and the
// classifier's gradient back into the blocked layout at the last ReLU: 4 conversions. Without
// it, every convolution converts its input and output in each of its passes (over 100).
TEST(BlockedStepTest, AResNet18StepConvertsOnlyAtTheInputAndTheClassifier) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  if (conv2d_kernel_name({4, 64, 32, 32}, {64, 64, 3, 3}, DType::Float32, {1}, {1}) != "onednn-direct")
    GTEST_SKIP() << "oneDNN does not run this convolution";
  const StepResult blocked = train_two_steps(true);
  const StepResult plain = train_two_steps(false);
  if (plain.conversions == 0) GTEST_SKIP() << "oneDNN chose plain layouts on this CPU";
  EXPECT_EQ(blocked.conversions, 4);
  EXPECT_GT(plain.conversions, 100);

  // The same step: float32 sums in other orders (batch norm over 16-channel lanes).
  EXPECT_NEAR(blocked.loss, plain.loss, 1e-5 * std::abs(plain.loss));
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (size_t i = 0; i < blocked.grads.size(); ++i) {
    const auto a = to_vector<double>(blocked.grads[i]), b = to_vector<double>(plain.grads[i]);
    double err = 0, scale = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      err = std::max(err, std::abs(a[k] - b[k]));
      scale = std::max(scale, std::abs(b[k]));
    }
    EXPECT_LT(err, 1e-4 * scale + 1e-7) << "parameter " << i;
  }
}

}  // namespace
