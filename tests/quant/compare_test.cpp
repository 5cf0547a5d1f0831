// quant::compare, the numeric debugger (Note [Numeric debugger]): its SQNR, cosine and max
// abs error against values computed by hand, the matching of nodes across the passes (BN
// folded into QConvBN, PTQ, deploy), and models that do not belong together refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qflow/qflow.h"
#include "qflow/quant/quant.h"
#include "quant/pass_test_util.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

// x (N, 2) → fc (Linear 2 → 1, no bias) → relu: small enough to quantize by hand.
struct TwoInputNeuron : nn::Cloneable<TwoInputNeuron> {
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 2, .out = 1, .bias = false}));
  Tensor forward(const Tensor& x) override { return F::relu((*fc)(x)); }
};

std::shared_ptr<fx::GraphModule> neuron_graph() {
  auto net = std::make_shared<TwoInputNeuron>();
  {
    NoGradGuard no_grad;
    net->fc->weight.copy_(from_vector<float>({1.0f, 0.25f}, {1, 2}));
  }
  net->eval();
  return fx::symbolic_trace(net, zeros({1, 2}));
}

// Batches whose second feature is 0, so fc's output is the first feature times 1.
const Tensor kBatch1 = from_vector<float>({0.5f, 0, 1, 0, -1, 0, 0.25f, 0}, {4, 2});
const Tensor kBatch2 = from_vector<float>({0.75f, 0, -0.5f, 0}, {2, 2});

// 2-bit symmetric google (Note [Quantization numerics]): grid [-2, 1], scale = max|v| / 1.
// Calibrated on kBatch1, the input scale is max|x| = 1; the weight (1, 0.25) has scale 1 and
// rounds to (1, 0). Rounding is half to even.
//   batch 1: x₀ = 0.5, 1, -1, 0.25   → x_q = 0, 1, -1, 0  (0.5 and 0.25 round to 0)
//            fc: float 0.5, 1, -1, 0.25; quantized 0, 1, -1, 0
//   batch 2: x₀ = 0.75, -0.5         → x_q = 1, 0         (-0.5 rounds to -0)
//            fc: float 0.75, -0.5; quantized 1, 0
// fc over both batches (6 values):
//   Σ ref² = 0.25 + 1 + 1 + 0.0625 + 0.5625 + 0.25 = 3.125
//   Σ err² = 0.25 + 0 + 0 + 0.0625 + 0.0625 + 0.25 = 0.625     → SQNR = 10·log10(5) dB
//   Σ ref·q = 0 + 1 + 1 + 0 + 0.75 + 0 = 2.75,  Σ q² = 0 + 1 + 1 + 0 + 1 + 0 = 3
//                                                             → cosine = 2.75 / √(3.125·3)
//   max |err| = 0.5
// (Averaging per-batch SQNRs would give (10·log10(2.3125/0.3125) + 10·log10(0.8125/0.3125)) / 2
// = 6.42 dB instead of 6.99: the sums run over all batches.)
// relu, the negatives zeroed (float 0.5, 1, 0, 0.25, 0.75, 0; quantized 0, 1, 0, 0, 1, 0):
//   Σ ref² = 0.25 + 1 + 0.0625 + 0.5625 = 1.875,  Σ err² = 0.25 + 0.0625 + 0.0625 = 0.375
//                                                             → SQNR = 10·log10(5) dB
//   Σ ref·q = 1 + 0.75 = 1.75,  Σ q² = 2                      → cosine = 1.75 / √(1.875·2)
//   max |err| = 0.5; alone (fed fc's float output) relu is exact: +inf.
// The weight: Σ w² = 1 + 0.0625, Σ (w − w_q)² = 0.0625        → 10·log10(17) dB.
void expect_hand_computed(const quant::Comparison& c) {
  EXPECT_EQ(c.batches, 2);
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_TRUE(c.skipped.empty()) << fmt::format("{}", fmt::join(c.skipped, "; "));
  const quant::NodeComparison& fc = c.at("fc");
  EXPECT_EQ(fc.reference, "fc");
  EXPECT_EQ(fc.elements, 6);
  EXPECT_NEAR(fc.sqnr_db, 10 * std::log10(5.0), 1e-9);
  EXPECT_NEAR(fc.cosine, 2.75 / std::sqrt(3.125 * 3), 1e-12);
  EXPECT_DOUBLE_EQ(fc.max_abs_error, 0.5);
  EXPECT_NEAR(fc.local_sqnr_db, 10 * std::log10(5.0), 1e-9);  // its input is the model's input
  ASSERT_TRUE(fc.weight_sqnr_db.has_value());
  EXPECT_NEAR(*fc.weight_sqnr_db, 10 * std::log10(17.0), 1e-9);
  const quant::NodeComparison& relu = c.at("relu");
  EXPECT_EQ(relu.what, "relu");
  EXPECT_NEAR(relu.sqnr_db, 10 * std::log10(5.0), 1e-9);
  EXPECT_NEAR(relu.cosine, 1.75 / std::sqrt(1.875 * 2), 1e-12);
  EXPECT_DOUBLE_EQ(relu.max_abs_error, 0.5);
  EXPECT_EQ(relu.local_sqnr_db, std::numeric_limits<double>::infinity());
  EXPECT_FALSE(relu.weight_sqnr_db.has_value());
}

const quant::QConfig k2Bits{.bits = 2};

}  // namespace

TEST(NumericDebugger, SqnrCosineAndMaxErrorOfAQatModelEqualTheHandComputedValues) {
  auto gm = neuron_graph();
  auto qat = quant::quantization_aware_training(*gm, kBatch1, k2Bits);
  quant::calibrate(*qat, std::vector<Tensor>{kBatch1});
  const quant::Comparison c = quant::compare(*gm, *qat, std::vector<Tensor>{kBatch1, kBatch2});
  EXPECT_EQ(c.at("fc").what, "QLinear (fc)");
  expect_hand_computed(c);
}

TEST(NumericDebugger, TheDeployModelInIntegersGivesTheSameNumbers) {
  auto gm = neuron_graph();
  auto qat = quant::quantization_aware_training(*gm, kBatch1, k2Bits);
  quant::calibrate(*qat, std::vector<Tensor>{kBatch1});
  auto deploy = quant::dequantization_aware_training(*gm, *qat, kBatch1, k2Bits);
  ASSERT_TRUE(deploy->get_submodule<quant::DLinear>("fc")->runs_integer());
  const quant::Comparison c = quant::compare(*gm, *deploy, std::vector<Tensor>{kBatch1, kBatch2, kBatch1}, 2);
  EXPECT_EQ(c.at("fc").what, "DLinear (fc)");
  expect_hand_computed(c);  // batches = 2 stopped the third
}

TEST(NumericDebugger, AQatConvBnIsComparedWithTheBatchNormItFolded) {
  manual_seed(3);
  struct Plain : nn::Cloneable<Plain> {
    std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 1, .out = 4, .kernel = 3}));
    std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 4}));
    Tensor forward(const Tensor& x) override { return F::relu((*bn1)((*conv1)(x))); }
  };
  auto net = std::make_shared<Plain>();
  net->train();
  for (int i = 0; i < 3; ++i) (*net)(randn({8, 1, 6, 6}) * 2 + 1);  // running statistics away from 0/1
  net->eval();
  const Tensor x = randn({4, 1, 6, 6});
  auto float_gm = fx::symbolic_trace(net, x);
  auto qat = quant::quantization_aware_training(*float_gm, x, {});
  ASSERT_EQ(qat->get_submodule("conv1")->type_name(), "QConvBN");
  const std::vector<Tensor> batches{x, randn({4, 1, 6, 6})};

  // Fake quantization off: the QConvBN computes conv → BN, so only float rounding is left.
  quant::enable_fake_quant(*qat, false);
  quant::calibrate(*qat, batches);
  quant::Comparison c = quant::compare(*float_gm, *qat, batches);
  EXPECT_TRUE(c.skipped.empty()) << fmt::format("{}", fmt::join(c.skipped, "; "));
  EXPECT_EQ(c.at("conv1").reference, "bn1");  // not conv1's own output: the BN is inside
  EXPECT_GT(c.at("conv1").sqnr_db, 100);
  EXPECT_GT(c.at("conv1").cosine, 1 - 1e-9);
  ASSERT_TRUE(c.at("conv1").weight_sqnr_db.has_value());
  EXPECT_GT(*c.at("conv1").weight_sqnr_db, 100);  // the float weight with bn1 folded in

  // 8 bits: the error of one int8 layer, far below the output's size.
  quant::enable_fake_quant(*qat, true);
  c = quant::compare(*float_gm, *qat, batches);
  EXPECT_GT(c.at("conv1").sqnr_db, 25);
  EXPECT_LT(c.at("conv1").sqnr_db, 60);
  EXPECT_GT(c.at("conv1").cosine, 0.99);
  EXPECT_GT(*c.at("conv1").weight_sqnr_db, 30);
  EXPECT_LT(*c.at("conv1").weight_sqnr_db, 60);
  EXPECT_EQ(c.at("relu").local_sqnr_db, std::numeric_limits<double>::infinity());
  EXPECT_LT(c.at("relu").sqnr_db, 100);  // end to end it carries conv1's rounding
  // The printouts: a row per node, and the worst table ranked by the error a node makes alone.
  EXPECT_THAT(c.to_csv(), HasSubstr("node,reference,what,elements,sqnr_db,cosine,max_abs_error,local_sqnr_db,"
                                    "weight_sqnr_db\nconv1,bn1,\"QConvBN (conv1)\",512,"));
  EXPECT_THAT(c.to_csv(), HasSubstr("\nrelu,relu,\"relu\",512,"));
  EXPECT_EQ(c.worst(1).at(0).node, "conv1");
  EXPECT_THAT(c.table(5), HasSubstr("the 2 of 2 nodes with the lowest SQNR alone"));
  EXPECT_THAT(c.table(5), HasSubstr("\nconv1  QConvBN (conv1)  "));
}

TEST(NumericDebugger, PtqAndDeployModelsOfLeNetMatchEveryLayer) {
  const Tensor x = randn({4, 1, 28, 28});
  auto gm = pass_test::traced("lenet5", x, 0, {.in_channels = 1, .image_size = 28});
  gm->eval();
  auto ptq = quant::prepare_ptq(*gm, x, {});
  quant::calibrate(*ptq, std::vector<Tensor>{x});
  auto deploy = quant::dequantization_aware_training(*gm, *ptq, x, {});
  for (const auto& quantized : {ptq, deploy}) {
    const quant::Comparison c = quant::compare(*gm, *quantized, std::vector<Tensor>{x});
    EXPECT_TRUE(c.skipped.empty()) << fmt::format("{}", fmt::join(c.skipped, "; "));
    for (const char* layer : {"conv1", "conv2", "fc1", "fc2", "fc3"}) {
      const quant::NodeComparison& r = c.at(layer);
      EXPECT_GT(r.sqnr_db, 20) << layer;
      EXPECT_GT(r.local_sqnr_db, 25) << layer;
      EXPECT_GT(r.weight_sqnr_db.value_or(0), 30) << layer;
    }
    // The model's last output carries every layer's rounding; fc3 alone only its own.
    EXPECT_LT(c.at("fc3").sqnr_db, c.at("fc3").local_sqnr_db);
  }
}

TEST(NumericDebugger, ModelsThatDoNotBelongTogetherAreRefusedNamingTheNode) {
  const Tensor x = randn({2, 1, 28, 28});
  auto lenet = pass_test::traced("lenet5", x, 0, {.in_channels = 1, .image_size = 28});
  auto wider = pass_test::traced("lenet5", x, 0, {.num_classes = 7, .in_channels = 1, .image_size = 28});
  auto qat = quant::quantization_aware_training(*wider, x, {});
  quant::calibrate(*qat, std::vector<Tensor>{x});
  // Same nodes, but fc3 has 7 outputs in one and 10 in the other.
  EXPECT_THAT(quant_test::error_of([&] { quant::compare(*lenet, *qat, std::vector<Tensor>{x}); }),
              HasSubstr("quant::compare: %fc3 outputs [2, 7] in the quantized model but its float reference %fc3 "
                        "outputs [2, 10]; the quantized model was not made from this float model"));
  // A quantized layer the float model does not have.
  auto neuron = neuron_graph();
  EXPECT_THAT(quant_test::error_of([&] { quant::compare(*neuron, *qat, std::vector<Tensor>{x}); }),
              HasSubstr("quant::compare: %conv1 (QConv2d (conv1)) has no node of that name in the float model"));
  // A node of the same name running another kind of layer.
  struct Mislabelled : nn::Cloneable<Mislabelled> {
    std::shared_ptr<nn::Linear> conv1 = register_module("conv1", nn::Linear({.in = 28, .out = 6}));
    Tensor forward(const Tensor& x) override { return (*conv1)(x); }
  };
  auto mislabelled = fx::symbolic_trace(std::make_shared<Mislabelled>(), x);
  EXPECT_THAT(quant_test::error_of([&] { quant::compare(*mislabelled, *qat, std::vector<Tensor>{x}); }),
              HasSubstr("quant::compare: %conv1 calls a Linear at 'conv1' in the float model but a QConv2d in the "
                        "quantized model, which no pass makes of a Linear"));
  // Nothing to compare with.
  EXPECT_THAT(quant_test::error_of([&] { quant::compare(*lenet, *qat, std::vector<Tensor>{}); }),
              HasSubstr("quant::compare: no batch ran"));
}
