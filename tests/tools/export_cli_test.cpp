// qflow-export end to end on LeNet-5: float and deploy files (from a QAT checkpoint, a deploy
// state_dict, a training checkpoint, post-training calibration on Fashion-MNIST) pass the official
// checker, and ONNX Runtime reproduces the output qflow computed for --save-example's input;
// the refusals exit 1 with a clear message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qflow/fx/fx.h"
#include "qflow/nn/checkpoint.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

struct ToolRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ExportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qflow_export_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ToolRun shell(const std::string& cmd) const {
    const std::string log = (dir_ / "out.txt").string();
    ToolRun r;
    const int raw = std::system((cmd + " > " + log + " 2>&1").c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.output = read_file(log);
    return r;
  }
  ToolRun run(const std::string& args) const { return shell(std::string(QFLOW_BIN_DIR) + "/qflow-export " + args); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// The official checker on `file`; true when it passes.
  bool checker_passes(const std::string& file) const {
    const ToolRun r = shell("/usr/bin/python3 " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/check_onnx.py " + file);
    EXPECT_EQ(r.status, 0) << r.output;
    return r.status == 0;
  }
  /// ONNX Runtime on --save-example's input, compared with qflow's expected output.
  json ort_versus_qflow(const std::string& file, const std::string& example_dir, const std::string& dims) const {
    const ToolRun r = shell("node " + std::string(QFLOW_SOURCE_DIR) + "/tools/onnxruntime/run_onnx.js " + file + " " +
                            example_dir + "/input.bin " + dims + " " + example_dir + "/output.bin " + example_dir +
                            "/expected.bin");
    EXPECT_EQ(r.status, 0) << r.output;
    return r.status == 0 ? json::parse(r.output) : json();
  }

  std::filesystem::path dir_;
};

const char* kLenet = "--model lenet5 --in-channels 1 --image-size 28";

/// A calibrated LeNet-5 QAT model and its deploy model (per-channel symmetric).
struct Quantized {
  std::shared_ptr<fx::GraphModule> qat, deploy;
};
Quantized quantized_lenet(const quant::QConfig& qc) {
  manual_seed(0);  // the tool's --seed 0 builds the same float model
  auto model = models::create("lenet5", {.in_channels = 1, .image_size = 28});
  model->eval();
  const Tensor example = randn({1, 1, 28, 28});
  auto float_gm = fx::symbolic_trace(model, example);
  Quantized q;
  q.qat = quant::quantization_aware_training(*float_gm, example, qc);
  manual_seed(4);
  quant::calibrate(*q.qat, std::vector<Tensor>{randn({8, 1, 28, 28})});
  q.deploy = quant::dequantization_aware_training(*float_gm, *q.qat, example, qc);
  return q;
}

TEST_F(ExportCliTest, HelpListsTheOptions) {
  const ToolRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--model", "--checkpoint", "--stage", "--out", "--bits", "--scheme", "--formula",
                           "--per-channel", "--calibrate", "--opset", "--static-batch", "--save-example"})
    EXPECT_THAT(r.output, HasSubstr(flag));
  EXPECT_THAT(r.output, HasSubstr("trtexec --onnx=FILE --int8"));
}

TEST_F(ExportCliTest, FloatModelRunsInOnnxRuntime) {
  const std::string file = path("lenet5.onnx");
  const ToolRun r = run(std::string(kLenet) + " --out " + file + " --batch 3 --save-example " + path("ex"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input  'input' float32 [batch, 1, 28, 28]"));
  EXPECT_THAT(r.output, HasSubstr("output 'output' float32 [batch, 10]"));
  EXPECT_THAT(r.output, HasSubstr("(2 Conv, 1 Flatten, 3 Gemm, 2 MaxPool, 4 Relu)"));
  EXPECT_TRUE(checker_passes(file));
  const json ort = ort_versus_qflow(file, path("ex"), "3,1,28,28");
  EXPECT_EQ(ort["dims"], json({3, 10}));
  EXPECT_LT(ort["max_rel_diff"].get<double>(), 1e-4);
}

TEST_F(ExportCliTest, DeployFromQatCheckpointAndFromDeployStateDict) {
  const quant::QConfig qc{.per_layer = false};
  const Quantized q = quantized_lenet(qc);
  nn::save(q.qat->state_dict(), path("qat.safetensors"));
  nn::save(q.deploy->state_dict(), path("deploy.safetensors"));
  for (const char* ckpt : {"qat.safetensors", "deploy.safetensors"}) {
    const std::string file = path(std::string(ckpt) + ".onnx");
    const ToolRun r = run(std::string(kLenet) + " --stage deploy --per-channel --checkpoint " + path(ckpt) +
                          " --out " + file + " --batch 2 --save-example " + path("ex"));
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("per_layer=false"));
    // Five layers: each one's input on Q/DQ, each one's int8 weight behind DequantizeLinear.
    EXPECT_THAT(r.output,
                HasSubstr("(2 Conv, 10 DequantizeLinear, 1 Flatten, 3 Gemm, 2 MaxPool, 5 QuantizeLinear, 4 Relu)"));
    EXPECT_TRUE(checker_passes(file));
    const json ort = ort_versus_qflow(file, path("ex"), "2,1,28,28");
    EXPECT_LT(ort["max_rel_diff"].get<double>(), 1e-2) << ckpt;
    // qflow's expected output is the deploy model's float simulation, the function the Q/DQ
    // graph describes: both checkpoints rebuild the same model.
    const std::string bytes = read_file(path("ex") + "/input.bin");
    std::vector<float> in(bytes.size() / 4);
    std::memcpy(in.data(), bytes.data(), bytes.size());
    NoGradGuard no_grad;
    q.deploy->eval();
    quant::set_integer(*q.deploy, false);
    const Tensor want = (*q.deploy)(from_vector<float>(in, {2, 1, 28, 28}));
    quant::set_integer(*q.deploy, true);
    const std::string out = read_file(path("ex") + "/expected.bin");
    std::vector<float> got(out.size() / 4);
    std::memcpy(got.data(), out.data(), out.size());
    EXPECT_EQ(got, to_vector<float>(want)) << ckpt;
  }
  // The deploy state_dict holds the int8 weights themselves, so the file exported from it is
  // the one exported from the QAT checkpoint and from the model in memory, byte for byte.
  const std::string from_deploy = read_file(path("deploy.safetensors.onnx"));
  EXPECT_EQ(nn::load(path("deploy.safetensors")).at("conv1.weight").dtype(), DType::Int8);
  EXPECT_EQ(from_deploy, read_file(path("qat.safetensors.onnx")));
  EXPECT_EQ(from_deploy, onnx::export_to_bytes(*q.deploy, randn({2, 1, 28, 28})).bytes);
}

TEST_F(ExportCliTest, OlderFloatDeployStateDictExportsTheSameFile) {
  // Before deployed weights were integers, deploy.safetensors held them as floats on their
  // grids; qflow-export converts them exactly and writes the same file.
  const quant::QConfig qc{.per_layer = false};
  const Quantized q = quantized_lenet(qc);
  nn::StateDict older = q.deploy->state_dict();
  for (const auto& [path, m] : q.deploy->named_modules()) {
    if (const auto* d = dynamic_cast<const quant::DConv2d*>(m.get())) older.insert_or_assign(path + ".weight", d->float_weight());
    if (const auto* d = dynamic_cast<const quant::DLinear*>(m.get())) older.insert_or_assign(path + ".weight", d->float_weight());
  }
  nn::save(older, path("older.safetensors"));
  nn::save(q.deploy->state_dict(), path("deploy.safetensors"));
  for (const char* ckpt : {"older.safetensors", "deploy.safetensors"}) {
    const ToolRun r = run(std::string(kLenet) + " --stage deploy --per-channel --checkpoint " + path(ckpt) + " --out " +
                          path(std::string(ckpt) + ".onnx"));
    ASSERT_EQ(r.status, 0) << r.output;
    if (std::string(ckpt) == "older.safetensors") {
      EXPECT_THAT(r.output, HasSubstr("; 5 float weights converted"));
    }
  }
  EXPECT_EQ(read_file(path("older.safetensors.onnx")), read_file(path("deploy.safetensors.onnx")));
  EXPECT_LT(std::filesystem::file_size(path("deploy.safetensors")),
            std::filesystem::file_size(path("older.safetensors")) / 3);
}

TEST_F(ExportCliTest, TrainingCheckpointGivesItsModelWeights) {
  // qflow-train's last.safetensors: the model's entries under "model.", plus optimizer state.
  manual_seed(21);
  auto model = models::create("lenet5", {.in_channels = 1, .image_size = 28});
  nn::optim::SGD sgd(model->parameters(), nn::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  nn::save_training_checkpoint(path("last.safetensors"), *model, sgd, nullptr, {.epoch = 1, .step = 5});
  const ToolRun r = run(std::string(kLenet) + " --checkpoint " + path("last.safetensors") + " --out " +
                        path("last.onnx") + " --batch 2 --save-example " + path("ex"));
  ASSERT_EQ(r.status, 0) << r.output;
  // The example output is the checkpoint's model (seed 21), not the tool's seed-0 initialisation.
  const std::string bytes = read_file(path("ex") + "/input.bin");
  std::vector<float> in(bytes.size() / 4);
  std::memcpy(in.data(), bytes.data(), bytes.size());
  NoGradGuard no_grad;
  model->eval();
  const Tensor want = (*model)(from_vector<float>(in, {2, 1, 28, 28}));
  const std::string out = read_file(path("ex") + "/expected.bin");
  std::vector<float> got(out.size() / 4);
  std::memcpy(got.data(), out.data(), out.size());
  EXPECT_EQ(got, to_vector<float>(want));
  EXPECT_LT(ort_versus_qflow(path("last.onnx"), path("ex"), "2,1,28,28")["max_rel_diff"].get<double>(), 1e-4);
}

TEST_F(ExportCliTest, DeployByCalibrationOnFashionMnist) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string file = path("ptq.onnx");
  const ToolRun r = run(std::string(kLenet) + " --stage deploy --calibrate fashion-mnist --calibrate-batches 2 " +
                        "--batch-size 16 --scheme affine --out " + file + " --batch 2 --save-example " + path("ex"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("calibrated on 2 batches of fashion-mnist"));
  EXPECT_THAT(r.output, HasSubstr("5 QuantizeLinear"));
  EXPECT_TRUE(checker_passes(file));
  EXPECT_LT(ort_versus_qflow(file, path("ex"), "2,1,28,28")["max_rel_diff"].get<double>(), 1e-2);
}

TEST_F(ExportCliTest, RefusalsExitWithAMessage) {
  ToolRun r = run(std::string(kLenet) + " --stage deploy --out " + path("x.onnx"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("qflow-export: error: --stage deploy needs quantization statistics"));

  const Quantized q = quantized_lenet({.bits = 4});
  nn::save(q.qat->state_dict(), path("qat4.safetensors"));
  r = run(std::string(kLenet) + " --stage float --checkpoint " + path("qat4.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("holds a QAT model; --stage float needs float weights"));
  r = run(std::string(kLenet) + " --stage deploy --bits 4 --checkpoint " + path("qat4.safetensors") + " --out " +
          path("x.onnx"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("the quantization grid [-8, 7] cannot be expressed at opset 13"));
  EXPECT_FALSE(std::filesystem::exists(path("x.onnx")));

  // A training checkpoint records the QConfig it was trained with; other flags are refused.
  const Quantized affine = quantized_lenet({.scheme = quant::Scheme::Affine});
  nn::optim::SGD sgd(affine.qat->parameters(), nn::optim::SGDOptions{.lr = 0.1});
  nn::save_training_checkpoint(path("last.safetensors"), *affine.qat, sgd, nullptr, {.epoch = 1},
                               {{"quant", "qat " + quant::QConfig{.scheme = quant::Scheme::Affine}.to_string()}});
  r = run(std::string(kLenet) + " --stage deploy --checkpoint " + path("last.safetensors") + " --out " + path("x.onnx"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("was trained with quantization 'qat QConfig(bits=8, scheme=affine, formula=google, "
                                  "per_layer=true, momentum=0.95, ste=pure)', but the flags ask for QConfig(bits=8, "
                                  "scheme=symmetric, formula=google, per_layer=true)"));
  r = run(std::string(kLenet) + " --stage deploy --scheme affine --checkpoint " + path("last.safetensors") +
          " --out " + path("x.onnx"));
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
