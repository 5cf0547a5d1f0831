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
// meets plain tensors: the last block's output into the classifier's plain average pool, and
// the classifier's gradient back into the blocked layout at the last ReLU: 2 conversions. (The
// 3-channel input images need none: oneDNN reads the stem's source as plain NCHW.) Without it,
// every convolution converts its input and output in each pass: 116 on this CPU.
TEST(BlockedStepTest, AResNet18StepConvertsOnlyAtTheClassifier) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  if (conv2d_kernel_name({4, 64, 32, 32}, {64, 64, 3, 3}, DType::Float32, {1}, {1}) != "onednn-direct")
    GTEST_SKIP() << "oneDNN does not run this convolution";
  const StepResult blocked = train_two_steps(true);
  const StepResult plain = train_two_steps(false);
  if (plain.conversions == 0) GTEST_SKIP() << "oneDNN chose plain layouts on this CPU";
  EXPECT_LE(blocked.conversions, 4) << "the input and the classifier, at most twice each";
  EXPECT_GT(plain.conversions, 100);

  // The same step up to float32 sums in other orders. Not elementwise: a ReLU input within a
  // rounding error of 0 (measured: 2.7e-7 in layer1.1) takes the other side of the mask in one
  // of the two runs and changes its gradient element outright, and the blocks before it see
  // that element. Over a whole parameter the difference stays small in the L2 norm (a layout
  // mistake, a channel block in the wrong place, gives differences of order 1).
  EXPECT_NEAR(blocked.loss, plain.loss, 1e-5 * std::abs(plain.loss));
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (size_t i = 0; i < blocked.grads.size(); ++i) {
    const auto a = to_vector<double>(blocked.grads[i]), b = to_vector<double>(plain.grads[i]);
    double diff = 0, norm = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      diff += (a[k] - b[k]) * (a[k] - b[k]);
      norm += b[k] * b[k];
    }
    EXPECT_LT(std::sqrt(diff), 1e-2 * std::sqrt(norm) + 1e-9) << "parameter " << i;  // measured <= 2.2e-3
  }
}

}  // namespace
