// --observer and its knobs through the tools on LeNet-5: bad words and combinations refused
// with clear errors (flags and --qconfig files); qflow-train trains LSQ scales (a group without
// weight decay), resumes them and deploys; qflow-export writes a TQT-trained checkpoint's
// power-of-two scales as Q/DQ that ONNX Runtime runs as qflow does; PTQ run with the
// percentile observer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

const char* kLenet = "--model lenet5 --in-channels 1 --image-size 28";
const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

class ObserverCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qflow_observer_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string read(const std::string& file) const {
    std::ifstream in(file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  /// Runs a command line; returns its exit status, with stdout and stderr in `output`.
  int run(const std::string& cmd, std::string& output) const {
    const int raw = std::system((cmd + " > " + path("out.txt") + " 2>&1").c_str());
    output = read(path("out.txt"));
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  std::string tool(const char* name) const { return std::string(QFLOW_BIN_DIR) + "/" + name + " "; }

  std::filesystem::path dir_;
};

}  // namespace

TEST_F(ObserverCliTest, BadObserversAreRefusedWithClearErrors) {
  const std::string graph = tool("qflow-graph") + kLenet + " --stage qat --out " + path("q.dot");
  std::string out;
  ASSERT_EQ(run(graph + " --observer lsq --per-channel", out), 0) << out;
  EXPECT_NE(run(graph + " --observer entropy", out), 0);
  EXPECT_THAT(out, HasSubstr("--observer: entropy not in {moving_average,minmax,lsq,tqt,histogram,percentile,mse}"));
  EXPECT_NE(run(graph + " --observer tqt --scheme affine", out), 0);
  EXPECT_THAT(out, HasSubstr("QConfig: observer tqt supports only the symmetric scheme"));
  EXPECT_NE(run(graph + " --learn-zero-point", out), 0);
  EXPECT_THAT(out, HasSubstr("learn_zero_point needs observer lsq and the affine scheme"));
  EXPECT_NE(run(graph + " --percentile 20", out), 0);
  EXPECT_THAT(out, HasSubstr("--percentile"));
  EXPECT_NE(run(graph + " --qconfig " + write("m.json", R"({"global": {"observer": "lsq", "formula": "cambricon"}})"), out),
            0);
  EXPECT_THAT(out, HasSubstr("m.json: global: QConfig: observer lsq learns any scale, not a power of two"));
  EXPECT_NE(run(graph + " --qconfig " + write("n.json", R"({"rules": [{"path": "fc3", "qconfig": {"observer": "kl"}}]})"),
                out),
            0);
  EXPECT_THAT(out, HasSubstr("n.json: rules[0] (path 'fc3'): QConfig: unknown observer 'kl'"));
}

// A TQT-trained QAT checkpoint (power-of-two scales learned by two SGD steps) exported with the
// same flags: its Q/DQ scales are powers of two and ONNX Runtime agrees with qflow.
TEST_F(ObserverCliTest, ExportTakesLearnedScales) {
  manual_seed(0);
  auto model = models::create("lenet5", {.in_channels = 1, .image_size = 28});
  const Tensor example = randn({1, 1, 28, 28});
  auto float_gm = fx::symbolic_trace(model, example);
  const quant::QConfig qc{.observer = quant::ObserverKind::Tqt};
  auto qat = quant::quantization_aware_training(*float_gm, example, qc);
  qat->train();
  nn::optim::SGD sgd(qat->parameters(), nn::optim::SGDOptions{.lr = 0.05});
  for (int i = 0; i < 2; ++i) {
    sgd.zero_grad();
    cross_entropy((*qat)(randn({8, 1, 28, 28})), randint(0, 10, {8})).backward();
    sgd.step();
  }
  nn::save(qat->state_dict(), path("qat.safetensors"));
  const std::string file = path("m.onnx");
  std::string out;
  ASSERT_EQ(run(tool("qflow-export") + kLenet + " --stage deploy --observer tqt --checkpoint " + path("qat.safetensors") +
                    " --out " + file + " --batch 2 --save-example " + path("ex"),
                out),
            0)
      << out;
  ASSERT_EQ(run("/usr/bin/python3 " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/check_onnx.py " + file, out), 0) << out;
  int scales = 0;
  const json inits = json::parse(out)["initializers"];
  for (auto it = inits.begin(); it != inits.end(); ++it) {
    const std::string name = it.key();
    if (name.find("scale") == std::string::npos) continue;
    for (const auto& v : it.value()["values"]) {
      const double s = v.get<double>();
      EXPECT_EQ(std::exp2(std::round(std::log2(s))), s) << name;
      ++scales;
    }
  }
  EXPECT_GT(scales, 0) << out;
  ASSERT_EQ(run("node " + std::string(QFLOW_SOURCE_DIR) + "/tools/onnxruntime/run_onnx.js " + file + " " + path("ex") +
                    "/input.bin 2,1,28,28 " + path("ex") + "/output.bin " + path("ex") + "/expected.bin",
                out),
            0)
      << out;
  EXPECT_LT(json::parse(out)["max_rel_diff"].get<double>(), 1e-2);
  // Without --observer tqt the flags build observers the checkpoint's keys do not fit.
  EXPECT_NE(run(tool("qflow-export") + kLenet + " --stage deploy --checkpoint " + path("qat.safetensors") + " --out " + file,
                out),
            0);
  EXPECT_THAT(out, HasSubstr("log2_threshold"));
}

// The tool path only: the flags reach the observers and PTQ runs with them (the deploy model of
// PTQ is not written out, so its scales are not compared here). What histogram calibration
// computes, and that it differs from min/max, is tested in tests/quant/histogram_observer_test.cpp.
TEST_F(ObserverCliTest, TrainLearnsScalesResumesAndRunsPtqWithThePercentileObserver) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = path("run");
  const std::string train = tool("qflow-train") +
                            "--model lenet5 --dataset fashion-mnist --subset 192 --test-subset 64 --epochs 2 "
                            "--batch-size 64 --lr 0.05 --workers 1 --threads 1 --qat --bits 4 --per-channel "
                            "--checkpoint-dir " + dir;
  std::string out;
  ASSERT_EQ(run(train + " --observer lsq --stop-after 1", out), 0) << out;
  EXPECT_THAT(out, HasSubstr("qflow-train: 10 learned quantization parameters (scales, thresholds) train without weight "
                             "decay"));
  const nn::StateDict first = nn::load(dir + "/last.safetensors");
  ASSERT_TRUE(first.contains("model.conv1.input_observer.scale")) << out;
  ASSERT_EQ(run(train + " --observer lsq --resume", out), 0) << out;
  EXPECT_THAT(out, HasSubstr("| lenet5 | deploy (int8)"));
  const nn::StateDict last = nn::load(dir + "/last.safetensors");
  EXPECT_NE(to_vector<float>(last.at("model.conv2.weight_observer.scale")),
            to_vector<float>(first.at("model.conv2.weight_observer.scale")));  // trained on
  // --resume under another observer is refused (the recorded mapping differs).
  EXPECT_NE(run(train + " --resume --observer tqt", out), 0);
  EXPECT_THAT(out, HasSubstr("--resume"));
  // PTQ of float weights with the percentile observer: its QConfig is the one printed, and the
  // PTQ row is reported.
  manual_seed(0);
  nn::save(models::create("lenet5", {.in_channels = 1, .image_size = 28})->state_dict(), path("float.safetensors"));
  ASSERT_EQ(run(tool("qflow-train") + "--model lenet5 --dataset fashion-mnist --test-subset 64 --batch-size 32 "
                    "--workers 1 --threads 1 --eval-only --weights " + path("float.safetensors") + " --ptq "
                    "--calib-batches 2 --observer percentile --percentile 99.9 --checkpoint-dir " + path("ptq"),
                out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("observer=percentile, percentile=99.9"));
  EXPECT_THAT(out, HasSubstr("| lenet5 | PTQ (int8)"));
}
