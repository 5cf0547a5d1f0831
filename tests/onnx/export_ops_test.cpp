// The converters the zoo does not reach, on one small net: "same" convolution with an even
// kernel (asymmetric pads), grouped/dilated/strided conv, HardSwish at opset 13 (HardSigmoid·Mul)
// and 14 (HardSwish), HardSigmoid, Clip, Sigmoid, Tanh, LeakyRelu, Add/Sub with alpha, scalar Mul/Div,
// padded/dilated MaxPool, AveragePool without padding in the count, Concat, Flatten, Reshape
// keeping a symbolic batch, Linear on a 3-d input (MatMul), BatchNorm1d, ReduceMean. Each
// export is checked by onnx.checker and compared with ONNX Runtime.
#include "onnx_test_util.h"

using namespace qflow;
using namespace onnx_test;

namespace {

struct OpsNet : nn::Cloneable<OpsNet> {
  std::shared_ptr<nn::Conv2d> same =
      register_module("same", nn::Conv2d({.in = 3, .out = 4, .kernel = 4, .padding = "same"}));
  std::shared_ptr<nn::Conv2d> grouped = register_module(
      "grouped", nn::Conv2d({.in = 4, .out = 8, .kernel = 3, .stride = 2, .padding = 2, .dilation = 2, .groups = 2}));
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 25, .out = 6}));
  std::shared_ptr<nn::BatchNorm1d> bn = register_module("bn", nn::BatchNorm1d({.features = 8}));

  Tensor forward(const Tensor& x) override {
    const Tensor b = (*grouped)((*same)(x));                                    // (N, 8, 4, 4)
    Tensor c = F::hardswish(b) + F::relu6(b) * 0.5;
    c = c.sub(F::sigmoid(b), 2.0) + F::silu(b) * 0.25 + F::hardsigmoid(b) * 0.75;
    c = leaky_relu(c, 0.2) * F::tanh(b) / 3.0 + hardtanh(b, -0.5, 0.25);
    c = clamp(c, -1.5, 2.0);
    const Tensor d = F::max_pool2d(c, {3}, {1}, {1}, {1});                      // (N, 8, 4, 4)
    const Tensor e = F::avg_pool2d(c, {2}, {2}, {1}, false, false);             // (N, 8, 3, 3)
    const Tensor f = cat({F::flatten(d, 1), F::flatten(e, 1)}, 1);              // (N, 200)
    const Tensor g = f.view({f.size(0), 8, 25});
    return mean((*bn)((*fc)(g)), {2});                                          // (N, 8)
  }
};

class OpsExportTest : public OnnxTest, public ::testing::WithParamInterface<int64_t> {};

TEST_P(OpsExportTest, EveryConverterMatchesOnnxRuntime) {
  const int64_t opset = GetParam();
  manual_seed(3);
  auto net = std::make_shared<OpsNet>();
  {
    NoGradGuard no_grad;
    net->bn->running_mean.copy_(randn({8}) * 0.2);
    net->bn->running_var.copy_(rand({8}) + 0.5);
  }
  const std::string file = path("ops.onnx");
  onnx::export_model(net, randn({1, 3, 8, 8}), file, {.opset = opset});
  const json m = check(file);
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["opset"][""], opset);
  EXPECT_EQ(m["ir_version"], opset == 13 ? 7 : 8);
  const auto ops = op_counts(m);
  if (opset == 13) {
    EXPECT_EQ(ops.at("HardSigmoid"), 2);  // hardsigmoid, and hardswish's gate (x * HardSigmoid(x))
    EXPECT_EQ(ops.count("HardSwish"), 0u);
  } else {
    EXPECT_EQ(ops.at("HardSwish"), 1);
    EXPECT_EQ(ops.at("HardSigmoid"), 1);
  }
  EXPECT_EQ(ops.at("Conv"), 2);
  EXPECT_EQ(ops.at("Clip"), 3);  // relu6, hardtanh, clamp
  EXPECT_EQ(ops.at("Sigmoid"), 2);  // sigmoid, and silu's gate (x * Sigmoid(x))
  for (const char* op : {"Tanh", "LeakyRelu", "Sub", "Div", "MaxPool", "AveragePool",
                         "Concat", "Flatten", "Reshape", "MatMul", "Transpose", "BatchNormalization", "ReduceMean"})
    EXPECT_EQ(ops.count(op), 1u) << op;
  // "same" with an even kernel pads one more at the end, as PyTorch does.
  for (const auto& n : m["nodes"]) {
    if (n["name"] == "same") {
      EXPECT_EQ(n["attrs"]["pads"], json({1, 1, 2, 2}));
    }
  }
  // The reshape keeps the batch symbolic: 0 copies the input's dimension.
  EXPECT_EQ(m["initializers"]["view/shape"]["values"], json({0, 8, 25}));

  const Tensor x = randn({3, 3, 8, 8});
  const Tensor got = run_ort(file, x);
  ASSERT_TRUE(got.defined());
  const double err = relative_error(got, eval_output(net, x));
  std::printf("[ onnxruntime ] ops net opset %ld: max |ort - qflow| / max |qflow| = %.3g\n", static_cast<long>(opset),
              err);
  EXPECT_LT(err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Opsets, OpsExportTest, ::testing::Values(13, 14),
                         [](const ::testing::TestParamInfo<int64_t>& info) { return "opset" + std::to_string(info.param); });

}  // namespace
