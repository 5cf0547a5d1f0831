// Deploy (Q/DQ) export: the deployable model of a calibrated QAT model, for each published
// QConfig, passes the official checker, holds no BatchNormalization, stores weights as int8/uint8
// initializers behind DequantizeLinear, and runs in ONNX Runtime to qflow's deploy outputs.
#include <cmath>

#include "onnx_test_util.h"

using namespace qflow;
using namespace onnx_test;
using ::testing::HasSubstr;

namespace {

struct DeployCase {
  std::string model;
  quant::QConfig qconfig;
  int convs, linears;
};

std::string case_name(const DeployCase& c) {
  return fmt::format("{}_{}_{}_{}", c.model, quant::to_string(c.qconfig.scheme), quant::to_string(c.qconfig.formula),
                     c.qconfig.per_layer ? "per_layer" : "per_channel");
}

class DeployExportTest : public OnnxTest, public ::testing::WithParamInterface<DeployCase> {};

TEST_P(DeployExportTest, QdqModelPassesCheckerAndMatchesOnnxRuntime) {
  const DeployCase& c = GetParam();
  const quant::QConfig& qc = c.qconfig;
  auto deploy = deploy_model(c.model, qc);
  const std::string file = path("deploy.onnx");
  manual_seed(8);
  onnx::export_model(*deploy, randn({1, 3, 32, 32}), file);

  const json m = check(file);
  ASSERT_FALSE(m.is_null());
  const int layers = c.convs + c.linears;
  const auto ops = op_counts(m);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(ops.at("Conv"), c.convs);
  EXPECT_EQ(ops.at("Gemm"), c.linears);
  EXPECT_EQ(ops.at("QuantizeLinear"), layers);        // each layer's input activation
  EXPECT_EQ(ops.at("DequantizeLinear"), 2 * layers);  // ... and its weight
  EXPECT_EQ(m["metadata"]["qflow.stage"], "deploy");
  EXPECT_EQ(m["metadata"]["qflow.qconfig"], qc.to_string());
  EXPECT_EQ(m["inputs"][0]["dims"], json({"batch", 3, 32, 32}));

  // Weights: integers behind DequantizeLinear, per tensor (0-d scale) or per channel (axis 0).
  const int int_type = qc.scheme == quant::Scheme::Symmetric ? 3 /* INT8 */ : 2 /* UINT8 */;
  const json& w = m["initializers"]["conv1.weight_quantized"];
  EXPECT_EQ(w["data_type"], int_type);
  EXPECT_EQ(w["dims"].get<std::vector<int64_t>>(), deploy->get_submodule<quant::DConv2d>("conv1")->weight.sizes());
  const json& ws = m["initializers"]["conv1.weight_scale"];
  EXPECT_EQ(ws["dims"].size(), qc.per_layer ? 0u : 1u);
  for (const auto& n : m["nodes"]) {
    if (n["op"] != "DequantizeLinear" || n["outputs"][0] != "conv1.weight") continue;
    EXPECT_EQ(n["inputs"][0], "conv1.weight_quantized");
    EXPECT_EQ(n["attrs"].contains("axis"), !qc.per_layer);
  }
  // Cambricon scales are powers of two and are written exactly.
  if (qc.formula == quant::Formula::Cambricon) {
    for (const auto& [name, init] : m["initializers"].items()) {
      if (name.find("_scale") == std::string::npos) continue;
      for (double s : init["values"]) EXPECT_EQ(std::exp2(std::round(std::log2(s))), s) << name;
    }
  }

  manual_seed(9);
  const Tensor x = randn({2, 3, 32, 32});
  const Tensor want = eval_output(deploy, x);
  const Tensor got = run_ort(file, x);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.sizes(), want.sizes());
  const double err = relative_error(got, want);
  std::printf("[ onnxruntime ] %s deploy: max |ort - qflow| / max |qflow| = %.3g\n", case_name(c).c_str(), err);
  EXPECT_LT(err, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    PublishedConfigs, DeployExportTest,
    ::testing::Values(DeployCase{"resnet18", {}, 20, 1}, DeployCase{"resnet18", {.per_layer = false}, 20, 1},
                      DeployCase{"resnet18", {.scheme = quant::Scheme::Affine}, 20, 1},
                      DeployCase{"resnet18", {.scheme = quant::Scheme::Affine, .per_layer = false}, 20, 1},
                      DeployCase{"resnet18", {.formula = quant::Formula::Cambricon}, 20, 1},
                      DeployCase{"mobilenet_v2", {.per_layer = false}, 57, 1}),
    [](const ::testing::TestParamInfo<DeployCase>& info) { return case_name(info.param); });

}  // namespace
