// ONNX export of models quantized under a QConfig mapping and of models with several inputs
// and outputs: a two-input, two-output model through QAT, training steps, deploy and export,
// with ONNX Runtime agreeing on both outputs; a layer left float exports as float (its
// BatchNormalization too); a 4-bit layer is refused naming the node.
#include "onnx/onnx_test_util.h"
#include "qflow/quant/quant.h"

namespace {

using namespace onnx_test;
using ::testing::HasSubstr;
namespace F = qflow::nn::functional;

// An image and a feature vector in; logits and an auxiliary head out.
struct TwoInTwoOut : nn::Cloneable<TwoInTwoOut> {
  std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 1, .out = 4, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 4}));
  std::shared_ptr<nn::Conv2d> conv2 = register_module("conv2", nn::Conv2d({.in = 4, .out = 4, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn2 = register_module("bn2", nn::BatchNorm2d({.features = 4}));
  std::shared_ptr<nn::Linear> fc_img = register_module("fc_img", nn::Linear({.in = 4 * 6 * 6, .out = 5}));
  std::shared_ptr<nn::Linear> fc_feat = register_module("fc_feat", nn::Linear({.in = 6, .out = 5}));
  std::shared_ptr<nn::Linear> head = register_module("head", nn::Linear({.in = 5, .out = 3}));
  TensorList forward_list(const TensorList& in) override {
    Tensor a = F::relu((*bn1)((*conv1)(in[0])));
    a = F::relu((*bn2)((*conv2)(a)));
    const Tensor f = F::relu((*fc_feat)(in[1]));
    return {(*fc_img)(a.view({a.size(0), -1})) + f, (*head)(f)};
  }
};

TensorList examples() { return {zeros({1, 1, 6, 6}), zeros({1, 6})}; }

// 8 bits everywhere but conv2, which stays float with its BatchNorm.
quant::QConfigMapping conv2_float() {
  quant::QConfigMapping m(quant::QConfig{});
  m.set_path("conv2", std::nullopt);
  return m;
}

using ExportMappingTest = OnnxTest;

TEST_F(ExportMappingTest, TwoInputsTwoOutputsThroughQatTrainingDeployAndOnnxRuntime) {
  manual_seed(3);
  auto float_gm = fx::symbolic_trace(std::make_shared<TwoInTwoOut>(), examples());
  auto qat = quant::quantization_aware_training(*float_gm, examples(), conv2_float());
  qat->train();
  nn::optim::SGD sgd(qat->parameters(), nn::optim::SGDOptions{.lr = 0.02, .momentum = 0.9});
  const TensorList batch{randn({8, 1, 6, 6}), randn({8, 6})};
  const Tensor labels = randint(0, 5, {8});
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    sgd.zero_grad();
    const TensorList out = qat->call(batch);
    Tensor loss = cross_entropy(out[0], labels) + (out[1] * out[1]).mean();
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), losses.front());

  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, examples(), conv2_float());
  EXPECT_EQ(deploy->get_submodule("conv2")->type_name(), "Conv2d");
  EXPECT_EQ(deploy->get_submodule("bn2")->type_name(), "BatchNorm2d");
  const std::string file = path("two.onnx");
  const onnx::ExportSummary s = onnx::export_model(*deploy, examples(), file);
  EXPECT_EQ(s.input_names, (std::vector<std::string>{"input0", "input1"}));
  EXPECT_EQ(s.output_names, (std::vector<std::string>{"output0", "output1"}));
  EXPECT_EQ(s.input_shapes[1], (std::vector<int64_t>{-1, 6}));
  EXPECT_EQ(s.output_shapes[1], (std::vector<int64_t>{-1, 3}));
  const json m = check(file);
  ASSERT_FALSE(m.is_null());
  const auto ops = op_counts(m);
  EXPECT_EQ(ops.at("BatchNormalization"), 1);  // conv2's, float as the mapping says
  EXPECT_EQ(ops.at("Conv"), 2);
  EXPECT_EQ(ops.at("QuantizeLinear"), 4);      // the inputs of conv1, fc_img, fc_feat, head
  EXPECT_EQ(ops.at("DequantizeLinear"), 8);    // the same and their weights

  const TensorList x{randn({2, 1, 6, 6}), randn({2, 6})};
  deploy->eval();
  quant::set_integer(*deploy, false);  // ONNX Runtime computes Q/DQ in float, like the simulation
  TensorList want;
  {
    NoGradGuard no_grad;
    want = deploy->call(x);
  }
  const TensorList got = run_ort_all(file, x);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(got[k].sizes(), want[k].sizes()) << k;
    const double err = relative_error(got[k], want[k]);
    std::printf("[ onnxruntime ] two-input model, output %zu: max |ort - qflow| / max |qflow| = %.3g\n", k, err);
    EXPECT_LT(err, 1e-2) << k;
  }
}

TEST_F(ExportMappingTest, AFourBitLayerIsRefusedNamingTheNode) {
  manual_seed(4);
  auto float_gm = fx::symbolic_trace(std::make_shared<TwoInTwoOut>(), examples());
  quant::QConfigMapping m(quant::QConfig{});
  m.set_path("fc_feat", quant::QConfig{.bits = 4});
  auto qat = quant::quantization_aware_training(*float_gm, examples(), m);
  quant::calibrate(*qat, std::vector<TensorList>{{randn({4, 1, 6, 6}), randn({4, 6})}});
  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, examples(), m);
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*deploy, examples()); }),
              HasSubstr("onnx export: node %fc_feat (call_module[target=fc_feat]): the quantization grid [-8, 7] "
                        "cannot be expressed at opset 13"));
}

TEST_F(ExportMappingTest, IoNamesAndExampleCountsAreChecked) {
  auto float_gm = fx::symbolic_trace(std::make_shared<TwoInTwoOut>(), examples());
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*float_gm, examples()[0]); }),
              HasSubstr("onnx export: the graph has 2 inputs but 1 example inputs were given"));
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*float_gm, examples(), {.output_names = {"logits"}}); }),
              HasSubstr("onnx export: 1 output names given for 2 outputs"));
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*float_gm, examples(), {.output_names = {"a", "input1"}}); }),
              HasSubstr("got 'input1' twice"));
  const onnx::ExportSummary s =
      onnx::export_to_bytes(*float_gm, examples(), {.input_names = {"image", "features"}, .output_names = {"logits", "aux"}});
  EXPECT_EQ(s.input_name, "image");
  EXPECT_EQ(s.output_names[1], "aux");
}

}  // namespace
