// Deploy (Q/DQ) export: the deployable model of a calibrated QAT model, for each published
// QConfig, passes the official checker, holds no BatchNormalization, stores weights as int8/uint8
// initializers behind DequantizeLinear, and runs in ONNX Runtime to qflow's deploy outputs.
#include <algorithm>
#include <cmath>

#include "onnx_test_util.h"

using namespace qflow;
using namespace onnx_test;
using ::testing::HasSubstr;

namespace {

/// The integers qflow's deployed modules quantize their inputs to in one run, by the name of
/// the exporter's QuantizeLinear output ("<path>.input_quantized"), computed exactly as
/// fake_quantize does: clamp(round_half_even(x / s + zp), qmin, qmax) in float32.
class QuantizedInputs : public fx::Interpreter {
 public:
  using Interpreter::Interpreter;
  std::map<std::string, std::vector<float>> values;
  /// x / s + zp before rounding, to tell ties from real differences.
  std::map<std::string, std::vector<float>> pre_rounding;

 protected:
  Stack call_module(fx::Node& n, const Stack& args, const fx::ValueKwargs& kwargs) override {
    nn::ModulePtr m = module().get_submodule(n.target());
    if (auto* d = dynamic_cast<quant::DConv2d*>(m.get())) record(n.target(), args[0].tensor(), *d);
    if (auto* d = dynamic_cast<quant::DLinear*>(m.get())) record(n.target(), args[0].tensor(), *d);
    return Interpreter::call_module(n, args, kwargs);
  }

 private:
  template <class D>
  void record(const std::string& path, const Tensor& x, const D& d) {
    const float s = d.input_scale.template item<float>(), z = d.input_zero_point.template item<float>();
    const auto lo = static_cast<float>(d.qconfig().quant_min()), hi = static_cast<float>(d.qconfig().quant_max());
    std::vector<float> pre = to_vector<float>(x.contiguous());
    for (float& v : pre) v = v / s + z;
    std::vector<float> q(pre.size());
    for (size_t i = 0; i < pre.size(); ++i) q[i] = std::clamp(std::nearbyint(pre[i]), lo, hi);
    values[path + ".input_quantized"] = std::move(q);
    pre_rounding[path + ".input_quantized"] = std::move(pre);
  }
};

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
  const Tensor& conv1_weight = deploy->get_submodule<quant::DConv2d>("conv1")->weight;
  EXPECT_EQ(w["dims"].get<std::vector<int64_t>>(), conv1_weight.sizes());
  // ... the deployed layer's own integers (the checker shows the first 8).
  std::vector<int64_t> integers = to_vector<int64_t>(conv1_weight);
  integers.resize(8);
  EXPECT_EQ(w["values"].get<std::vector<int64_t>>(), integers);
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
  // A QDQ graph is the float simulation (float sums of dequantized values), which ONNX Runtime
  // runs; qflow's integer kernels sum exactly, so rounding ties fall differently in them
  // (IntegerDeploy compares the two in qflow).
  quant::set_integer(*deploy, false);
  const Tensor want = eval_output(deploy, x);
  const Tensor got = run_ort(file, x);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.sizes(), want.sizes());
  const double err = relative_error(got, want);
  std::printf("[ onnxruntime ] %s deploy: max |ort - qflow| / max |qflow| = %.3g\n", case_name(c).c_str(), err);
  EXPECT_LT(err, 1e-2);

  // Layer by layer: every QuantizeLinear output as a graph output, read back from ONNX Runtime
  // and compared with the integers qflow rounds to. A difference can only come from a value
  // that sits on (or, after float sums in another order, within an ulp of) a rounding tie.
  const ProcessRun exposed = run_process("/usr/bin/python3 " + std::string(QFLOW_SOURCE_DIR) +
                                             "/tests/onnx/expose_quantized.py " + file + " " + path("q.onnx"),
                                         dir_);
  ASSERT_EQ(exposed.status, 0) << exposed.err;
  const ProcessRun ort = run_process("node " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/run_all_outputs.js " +
                                         path("q.onnx") + " " + path("ort_in.bin") + " 2,3,32,32 " + dir_.string(),
                                     dir_);
  ASSERT_EQ(ort.status, 0) << ort.err;
  QuantizedInputs qflow_q(*deploy);
  {
    NoGradGuard no_grad;
    deploy->eval();
    qflow_q.run(x);
  }
  // Outputs come in graph order. Up to the first layer that differs, both runtimes quantized
  // the same integers; that layer's differences must be ties (qflow's x / s + zp within float
  // noise of k + 1/2), a step apart. After it the two runs read different inputs, so the
  // differences only spread; they are counted for the report.
  int64_t total = 0, differing = 0;
  int layers_compared = 0;
  std::string first_layer;
  int64_t first_count = 0;
  double first_max_steps = 0, first_max_tie_distance = 0;
  for (const auto& out : json::parse(ort.out)) {
    const std::string name = out["name"].get<std::string>();
    const auto it = qflow_q.values.find(name);
    if (it == qflow_q.values.end()) continue;  // the model's float output
    const std::string bytes = read_file(out["file"].get<std::string>());
    ASSERT_EQ(bytes.size(), it->second.size()) << name;
    const std::vector<float>& pre = qflow_q.pre_rounding.at(name);
    const bool is_signed = out["type"] == "int8";
    int64_t here = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      const double o = is_signed ? static_cast<int8_t>(bytes[i]) : static_cast<uint8_t>(bytes[i]);
      const double steps = std::abs(o - it->second[i]);
      if (steps == 0) continue;
      ++here;
      if (!first_layer.empty() && first_layer != name) continue;
      first_max_steps = std::max(first_max_steps, steps);
      first_max_tie_distance = std::max(first_max_tie_distance, std::abs(pre[i] - std::floor(pre[i]) - 0.5));
    }
    if (here > 0 && first_layer.empty()) {
      first_layer = name;
      first_count = here;
    }
    differing += here;
    total += static_cast<int64_t>(bytes.size());
    ++layers_compared;
  }
  EXPECT_EQ(layers_compared, layers);
  std::printf("[ onnxruntime ] %s deploy: quantized activations identical in %ld of %ld elements; first difference: "
              "%s (%ld elements, %g step, %.2g from a tie); the rest follow from it\n",
              case_name(c).c_str(), static_cast<long>(total - differing), static_cast<long>(total),
              first_layer.empty() ? "none" : first_layer.c_str(), static_cast<long>(first_count), first_max_steps,
              first_max_tie_distance);
  if (!first_layer.empty()) {
    EXPECT_LE(first_count, 4) << first_layer;
    EXPECT_EQ(first_max_steps, 1.0) << first_layer;
    EXPECT_LT(first_max_tie_distance, 1e-3) << first_layer;
  }
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
