// Float export of the zoo: every file passes the official checker (full_check) and ONNX Runtime
// reproduces qflow's eval output within 1e-4 relative, at a batch size other than the example's
// (the batch dimension is dynamic).
#include "onnx_test_util.h"

using namespace qflow;
using namespace onnx_test;
using ::testing::HasSubstr;

namespace {

struct ZooCase {
  std::string model;
  models::ModelOptions options;
  std::map<std::string, int> ops;  // expected ONNX operator counts
};

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.model; }

class ZooExportTest : public OnnxTest, public ::testing::WithParamInterface<ZooCase> {};

TEST_P(ZooExportTest, PassesCheckerAndMatchesOnnxRuntime) {
  const ZooCase& c = GetParam();
  manual_seed(7);
  auto model = models::create(c.model, c.options);
  randomize_batch_norms(*model);
  const IntList image{c.options.in_channels, c.options.image_size, c.options.image_size};
  const std::string file = path(c.model + ".onnx");

  const auto summary = onnx::export_model(model, randn({1, image[0], image[1], image[2]}), file);
  EXPECT_EQ(summary.input_shape, (std::vector<int64_t>{-1, image[0], image[1], image[2]}));
  EXPECT_EQ(summary.output_shape, (std::vector<int64_t>{-1, 10}));

  const json m = check(file);
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["opset"][""], 13);
  EXPECT_EQ(m["ir_version"], 7);
  EXPECT_EQ(m["inputs"].size(), 1u);
  EXPECT_EQ(m["inputs"][0]["name"], "input");
  EXPECT_EQ(m["inputs"][0]["dims"], json({"batch", image[0], image[1], image[2]}));
  EXPECT_EQ(m["outputs"][0]["name"], "output");
  EXPECT_EQ(m["outputs"][0]["dims"], json({"batch", 10}));
  EXPECT_EQ(m["metadata"]["qflow.version"], onnx::qflow_version());
  EXPECT_EQ(m["metadata"]["qflow.stage"], "float");
  EXPECT_EQ(op_counts(m), c.ops);
  // Every parameter and buffer the graph reads is an initializer named by its state_dict key.
  for (const auto& [name, t] : model->state_dict()) {
    if (name.find("num_batches_tracked") != std::string::npos) continue;
    ASSERT_TRUE(m["initializers"].contains(name)) << name;
    EXPECT_EQ(m["initializers"][name]["dims"].get<std::vector<int64_t>>(), t.sizes()) << name;
  }

  // Another batch size than the example's: the batch dimension really is dynamic.
  const Tensor x = randn({2, image[0], image[1], image[2]});
  const Tensor want = eval_output(model, x);
  const Tensor got = run_ort(file, x);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.sizes(), want.sizes());
  const double err = relative_error(got, want);
  EXPECT_LT(err, 1e-4) << c.model;
  RecordProperty("relative_error", std::to_string(err));
  std::printf("[ onnxruntime ] %s float: max |ort - qflow| / max |qflow| = %.3g\n", c.model.c_str(), err);
}

std::map<std::string, int> resnet_ops(int convs, int relus, int adds) {
  return {{"Conv", convs}, {"BatchNormalization", convs}, {"Relu", relus}, {"Add", adds},
          {"AveragePool", 1}, {"Flatten", 1}, {"Gemm", 1}};
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ZooExportTest,
    ::testing::Values(
        ZooCase{"resnet18", {}, resnet_ops(20, 17, 8)},
        ZooCase{"resnet50", {}, resnet_ops(53, 49, 16)},
        ZooCase{"mobilenet_v2", {},
                {{"Conv", 57}, {"BatchNormalization", 57}, {"Relu", 36}, {"Add", 14}, {"GlobalAveragePool", 1},
                 {"Flatten", 1}, {"Gemm", 1}}},
        ZooCase{"lenet5", {.in_channels = 1, .image_size = 28},
                {{"Conv", 2}, {"Relu", 4}, {"MaxPool", 2}, {"Flatten", 1}, {"Gemm", 3}}},
        ZooCase{"alexnet", {},
                {{"Conv", 5}, {"Relu", 7}, {"MaxPool", 3}, {"AveragePool", 1}, {"Flatten", 1}, {"Gemm", 3}}}),
    [](const ::testing::TestParamInfo<ZooCase>& info) { return info.param.model; });

}  // namespace
