// Fake quantization and observers on activations in oneDNN's blocked layout (Note [Opaque
// layouts] in core): the same values as on plain tensors, the layout kept, and a QAT ResNet18
// step that converts only at its classifier.
#include <gtest/gtest.h>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::quant;

namespace {

std::string layout_of(const Tensor& t) {
  const OpaqueLayout* l = t.impl()->opaque_layout();
  return l ? l->name() : "plain";
}

// A blocked convolution output with 32 channels (two whole nChw16c blocks, no padding).
Tensor blocked_activation(bool keep) {
  manual_seed(3);
  const Tensor x = randn({2, 8, 6, 6}), w = randn({32, 8, 3, 3});
  ConvSettingsGuard direct(ConvEngine::OneDNN, ConvAlgorithm::Direct);
  set_conv_keeps_blocked_layout(keep);
  Tensor y = conv2d(x, w, std::nullopt, {1}, {1});
  set_conv_keeps_blocked_layout(true);
  return y;
}

TEST(BlockedQatTest, FakeQuantizeAndItsGradientKeepTheLayoutAndTheValues) {
  Tensor blocked = blocked_activation(true);
  const Tensor plain = blocked_activation(false);
  if (layout_of(blocked) == "plain") GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  const QConfig qc{.bits = 8, .scheme = Scheme::Affine};
  const QParams qp = compute_qparams(amin(plain).reshape({1}), amax(plain).reshape({1}), qc);
  EXPECT_EQ(layout_of(blocked), "nChw16c") << "amin/amax read the blocked storage without converting";
  EXPECT_EQ(amin(blocked).item<float>(), amin(plain).item<float>());

  blocked.requires_grad_();
  Tensor q = fake_quantize(blocked, qp, qc);
  EXPECT_NE(layout_of(q), "plain");
  manual_seed(4);
  const Tensor g = randn(plain.sizes());
  q.backward(g);
  Tensor p = plain.detach().requires_grad_();
  Tensor qp_plain = fake_quantize(p, qp, qc);
  qp_plain.backward(g);
  EXPECT_EQ(to_vector<float>(q), to_vector<float>(qp_plain));
  EXPECT_EQ(to_vector<float>(blocked.grad()), to_vector<float>(p.grad()));
}

TEST(BlockedQatTest, AQatResNet18StepConvertsOnlyAtTheClassifier) {
  ConvSettingsGuard onednn(ConvEngine::OneDNN, ConvAlgorithm::Auto);
  if (layout_of(blocked_activation(true)) == "plain") GTEST_SKIP() << "oneDNN chose a plain layout on this CPU";
  manual_seed(0);
  const Tensor example = randn({1, 3, 32, 32});
  auto gm = fx::symbolic_trace(models::resnet18(), example);
  auto qat = quantization_aware_training(*gm, example, {});
  qat->train();
  const Tensor images = randn({4, 3, 32, 32});
  const Tensor labels = from_vector<int64_t>({1, 7, 3, 0});
  for (int step = 0; step < 2; ++step) {
    reset_layout_conversion_count();
    F::cross_entropy((*qat)(images), labels).backward();
  }
  // The average pool before the classifier, and its gradient at the last ReLU (see
  // Note [Conversions in a ResNet18 step] in tests/models/blocked_step_test.cpp).
  EXPECT_EQ(layout_conversion_count(), 2);
}

}  // namespace
