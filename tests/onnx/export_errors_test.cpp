// What the exporter refuses, with messages naming the node; and the promises around a refusal
// or an export: nothing written on error, the caller's model untouched, a dynamic batch only
// where the model really runs at other batch sizes.
#include <filesystem>

#include "onnx_test_util.h"

using namespace qflow;
using namespace onnx_test;
using ::testing::HasSubstr;

namespace {

struct ExpNet : nn::Cloneable<ExpNet> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 3, .out = 4, .kernel = 3}));
  Tensor forward(const Tensor& x) override { return (*conv)(x).exp(); }
};

/// A leaf module (registered below) whose forward the exporter must inline.
struct Softplusish : nn::Cloneable<Softplusish> {
  Tensor forward(const Tensor& x) override { return (x.exp() + 1.0).log(); }
};

struct LeafNet : nn::Cloneable<LeafNet> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 3, .out = 4, .kernel = 3}));
  std::shared_ptr<Softplusish> act = register_module("act", std::make_shared<Softplusish>());
  Tensor forward(const Tensor& x) override { return (*act)((*conv)(x)); }
};

/// Fixed sizes in view: runs at batch 1 only.
struct FixedBatchNet : nn::Cloneable<FixedBatchNet> {
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 8, .out = 2}));
  Tensor forward(const Tensor& x) override { return (*fc)(x.view({1, 8})); }
};

struct BnNet : nn::Cloneable<BnNet> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 3, .out = 4, .kernel = 3}));
  std::shared_ptr<nn::BatchNorm2d> bn = register_module("bn", nn::BatchNorm2d({.features = 4}));
  Tensor forward(const Tensor& x) override { return F::relu((*bn)((*conv)(x))); }
};

/// Calls an op registered here with neither an ONNX converter nor a refusal (op_coverage_test
/// leaves it out of its count).
struct UnaccountedOpNet : nn::Cloneable<UnaccountedOpNet> {
  static Stack identity(OpArgs& args) { return {Value(args.tensor("self").clone())}; }
  static std::vector<TensorMeta> like_self(const OpArgs& args) {
    return {{args.tensor("self").sizes(), args.tensor("self").dtype()}};
  }
  UnaccountedOpNet() {
    static const bool registered = [] {
      OpRegistry::instance().def("coverage_test_unaccounted(Tensor self) -> Tensor", like_self, identity);
      return true;
    }();
    (void)registered;
  }
  Tensor forward(const Tensor& x) override { return call_op("coverage_test_unaccounted", {Value(x)}).at(0).tensor(); }
};

class ExportErrorTest : public OnnxTest {};

TEST_F(ExportErrorTest, AnOpWithNeitherConverterNorRefusalIsRefusedAsUnaccounted) {
  const std::string msg = error_of([&] { onnx::export_to_bytes(std::make_shared<UnaccountedOpNet>(), randn({1, 3})); });
  EXPECT_THAT(msg, HasSubstr("(call_function[target=coverage_test_unaccounted]): no ONNX conversion for op "
                             "'coverage_test_unaccounted' (it has neither a converter nor a declared refusal"));
}

TEST_F(ExportErrorTest, RefusedOpIsRefusedNamingTheNodeAndTheReasonAndNothingIsWritten) {
  const std::string file = path("exp.onnx");
  const std::string msg = error_of([&] { onnx::export_model(std::make_shared<ExpNet>(), randn({1, 3, 8, 8}), file); });
  EXPECT_THAT(msg, HasSubstr("onnx export: node %exp (call_function[target=exp]): op 'exp' cannot be exported: " +
                             onnx::refused_ops().at("exp")));
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
}

TEST_F(ExportErrorTest, UnsupportedOpInsideAnInlinedLeafNamesTheModule) {
  fx::register_leaf_type<Softplusish>();
  const std::string msg = error_of([&] { onnx::export_to_bytes(std::make_shared<LeafNet>(), randn({1, 3, 8, 8})); });
  EXPECT_THAT(msg, HasSubstr("onnx export: node %act_exp (call_function[target=exp], from module "
                             "call_module[target=act]): op 'exp' cannot be exported"));
}

TEST_F(ExportErrorTest, AdaptivePoolWithUnequalWindowsIsRefused) {
  // AlexNet on 28x28 images pools a 3x3 map to 4x4: windows of different sizes.
  manual_seed(1);
  auto alexnet = models::create("alexnet", {.in_channels = 1, .image_size = 28});
  const std::string msg = error_of([&] { onnx::export_to_bytes(alexnet, randn({1, 1, 28, 28})); });
  EXPECT_THAT(msg, HasSubstr("onnx export: node %avgpool (call_function[target=adaptive_avg_pool2d], from module "
                             "call_module[target=avgpool]): adaptive_avg_pool2d from 3x3 to 4x4 uses windows of "
                             "different sizes"));
}

TEST_F(ExportErrorTest, CeilModeAveragePoolIsRefused) {
  struct Net : nn::Cloneable<Net> {
    Tensor forward(const Tensor& x) override { return F::avg_pool2d(x, {2}, {2}, {0}, true); }
  };
  const std::string msg = error_of([&] { onnx::export_to_bytes(std::make_shared<Net>(), randn({1, 2, 5, 5})); });
  EXPECT_THAT(msg, HasSubstr("node %avg_pool2d (call_function[target=avg_pool2d]): avg_pool2d with ceil_mode=True "
                             "has no exact ONNX AveragePool equivalent"));
}

TEST_F(ExportErrorTest, ModelThatCannotChangeBatchSizeNeedsAFixedBatch) {
  const auto net = std::make_shared<FixedBatchNet>();
  const std::string msg = error_of([&] { onnx::export_to_bytes(net, randn({1, 8})); });
  EXPECT_THAT(msg, HasSubstr("onnx export: the model does not run at batch size 2"));
  EXPECT_THAT(msg, HasSubstr("export with dynamic_batch = false"));
  const auto s = onnx::export_model(net, randn({1, 8}), path("fixed.onnx"), {.dynamic_batch = false});
  EXPECT_EQ(s.input_shape, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(s.output_shape, (std::vector<int64_t>{1, 2}));
  const json m = check(path("fixed.onnx"));
  EXPECT_EQ(m["inputs"][0]["dims"], json({1, 8}));
  EXPECT_EQ(m["nodes"][0]["op"], "Reshape");
}

TEST_F(ExportErrorTest, BadOptionsAreRefused) {
  const auto net = std::make_shared<BnNet>();
  const Tensor x = randn({1, 3, 8, 8});
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(net, x, {.opset = 12}); }),
              HasSubstr("onnx export: opset 12 is not supported (13 to 17)"));
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(net, x, {.input_name = "x", .output_name = "x"}); }),
              HasSubstr("input and output names must be non-empty and different"));
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(net, x, {.metadata = {{"qflow.version", "9"}}}); }),
              HasSubstr("metadata key 'qflow.version' is reserved"));
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(net, x.to(DType::Int64)); }),
              HasSubstr("the example input must be a floating point tensor"));
}

TEST_F(ExportErrorTest, TrainingModeModelIsExportedInEvalModeAndLeftAsItWas) {
  manual_seed(2);
  const auto net = std::make_shared<BnNet>();
  randomize_batch_norms(*net);
  net->train();
  const std::string file = path("bn.onnx");
  onnx::export_model(net, randn({1, 3, 8, 8}), file,
                     {.input_name = "images", .output_name = "features", .metadata = {{"purpose", "test"}}});
  EXPECT_TRUE(net->is_training());
  EXPECT_TRUE(net->bn->is_training());
  const json m = check(file);
  EXPECT_EQ(m["inputs"][0]["name"], "images");
  EXPECT_EQ(m["outputs"][0]["name"], "features");
  EXPECT_EQ(m["metadata"]["purpose"], "test");
  EXPECT_THAT(m["doc"].get<std::string>(), HasSubstr("Input 'images': float32 [batch, 3, 8, 8]"));
  const Tensor x = randn({2, 3, 8, 8});
  EXPECT_LT(relative_error(run_ort(file, x), eval_output(net, x)), 1e-4);  // running statistics, not batch ones
}

// ---- deploy graphs ---------------------------------------------------------------------------

TEST_F(ExportErrorTest, DeployGridsOnnxCannotExpressAreRefused) {
  auto deploy = deploy_model("lenet5", {.bits = 4}, {.in_channels = 1, .image_size = 28});
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*deploy, randn({1, 1, 28, 28})); }),
              HasSubstr("onnx export: node %conv1 (call_module[target=conv1]): the quantization grid [-8, 7] cannot "
                        "be expressed at opset 13"));
}

TEST_F(ExportErrorTest, ZeroPointOutsideItsTypeIsRefused) {
  auto deploy = deploy_model("lenet5", {.scheme = quant::Scheme::Affine}, {.in_channels = 1, .image_size = 28});
  {
    NoGradGuard no_grad;
    deploy->get_submodule<quant::DConv2d>("conv2")->input_zero_point.fill_(-3.0);
  }
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*deploy, randn({1, 1, 28, 28})); }),
              HasSubstr("node %conv2 (call_module[target=conv2]): conv2.input zero point -3 is outside the range "
                        "[0, 255] of uint8"));
}

TEST_F(ExportErrorTest, FloatWeightWithScalesIsRefused) {
  // A layer whose weight no grid reproduced keeps it in float (Note [Deployed module layout]);
  // with scales that are not all 0 it has no DequantizeLinear form.
  auto deploy = deploy_model("lenet5", {}, {.in_channels = 1, .image_size = 28});
  const auto fc1 = deploy->get_submodule<quant::DLinear>("fc1");
  auto float_fc1 = std::make_shared<quant::DLinear>(fc1->options(), fc1->qconfig(), quant::WeightStorage::Float);
  nn::StateDict scales = fc1->state_dict();
  scales.erase("weight");
  float_fc1->load_state_dict(scales, /*strict=*/false);
  deploy->add_submodule("fc1", float_fc1);
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*deploy, randn({1, 1, 28, 28})); }),
              HasSubstr("node %fc1 (call_module[target=fc1]): weight must hold the int8 integers of its grid, got "
                        "float32"));
}

TEST_F(ExportErrorTest, BatchNormLeftInADeployGraphIsRefused) {
  // A BatchNorm that follows no convolution is not folded by the passes; the deploy export
  // must not carry it.
  struct Net : nn::Cloneable<Net> {
    std::shared_ptr<nn::BatchNorm2d> bn = register_module("bn", nn::BatchNorm2d({.features = 3}));
    std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 3, .out = 4, .kernel = 3}));
    Tensor forward(const Tensor& x) override { return (*conv)((*bn)(x)); }
  };
  const Tensor x = randn({2, 3, 8, 8});
  auto float_gm = fx::symbolic_trace(std::make_shared<Net>(), x);
  auto qat = quant::quantization_aware_training(*float_gm, x, {});
  quant::calibrate(*qat, std::vector<Tensor>{x});
  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, x, {});
  EXPECT_THAT(error_of([&] { onnx::export_to_bytes(*deploy, x); }),
              HasSubstr("onnx export: the quantized model still holds a BatchNorm (ONNX node 'bn')"));
}

}  // namespace
