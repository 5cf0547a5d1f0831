// fx::fuse_activations on a QAT model: QConvBN → ReLU becomes one QConvBN that applies the ReLU
// (batch_norm_relu in the running fold), the residual add+ReLUs become add_relu; training stays
// bit-identical to the unfused QAT model, and the deploy model puts the ReLUs back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"
#include "qflow/quant/quant.h"
#include "step_results.h"

using namespace qflow;

namespace {

using qflow::testing_util::step_results;

size_t count_nodes(const fx::GraphModule& gm, const std::string& target) {
  size_t n = 0;
  for (const fx::Node* node : gm.graph())
    if (node->op() == fx::NodeOp::CallFunction && node->target() == target) ++n;
  return n;
}

}  // namespace

TEST(FusedQatTest, QConvBnReluTrainsBitIdenticallyAndDeploysWithItsRelu) {
  manual_seed(0);
  const Tensor example = zeros({1, 3, 32, 32});
  auto float_gm = fx::symbolic_trace(models::create("resnet18", {.num_classes = 10, .in_channels = 3, .image_size = 32}), example);
  auto plain = quant::quantization_aware_training(*float_gm, example, {});
  auto fused = quant::quantization_aware_training(*float_gm, example, {});
  const fx::ActivationFusions done = fx::fuse_activations(*fused);
  EXPECT_EQ(done.modules("QConvBN"), 9u);  // the stem's and every block's first QConvBN
  EXPECT_EQ(done.add_relu, 8u);
  EXPECT_EQ(count_nodes(*fused, "relu"), 0u);
  EXPECT_THAT(fused->get_submodule("layer1.0.conv1")->repr(), ::testing::HasSubstr("relu=True"));
  manual_seed(1);
  const Tensor x = randn({4, 3, 32, 32});
  for (int step = 0; step < 2; ++step) {
    const auto a = step_results(*fused, x), b = step_results(*plain, x);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(to_vector<double>(a[i]), to_vector<double>(b[i])) << "step " << step << " result " << i;
  }
  // Eval (the running-statistics fold, then relu) and the deploy models agree too.
  fused->eval();
  plain->eval();
  NoGradGuard no_grad;
  EXPECT_EQ(to_vector<float>((*fused)(x)), to_vector<float>((*plain)(x)));
  auto deploy_fused = quant::dequantization_aware_training(*float_gm, *fused, example, {});
  auto deploy_plain = quant::dequantization_aware_training(*float_gm, *plain, example, {});
  deploy_fused->eval();
  deploy_plain->eval();
  EXPECT_EQ(count_nodes(*deploy_fused, "relu"), 9u);
  EXPECT_EQ(to_vector<float>((*deploy_fused)(x)), to_vector<float>((*deploy_plain)(x)));
  // A clone keeps the fused form.
  auto copy = std::dynamic_pointer_cast<fx::GraphModule>(fused->clone());
  EXPECT_EQ(to_vector<float>((*copy)(x)), to_vector<float>((*fused)(x)));
}
