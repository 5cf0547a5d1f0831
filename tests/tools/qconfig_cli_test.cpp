// --qconfig FILE.json (Note [QConfig mapping]) through the three tools on LeNet-5: qflow-graph
// draws each layer at its own bits and leaves "none" layers float; qflow-export writes 8-bit
// layers as Q/DQ and float ones as float (ONNX Runtime agreeing), refuses a 4-bit layer and a
// checkpoint trained under another mapping; qflow-train records the mapping and --resume
// refuses another one. Invalid files are refused with the place and the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "qflow/fx/fx.h"
#include "qflow/nn/checkpoint.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

const char* kLenet = "--model lenet5 --in-channels 1 --image-size 28";
const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

// 4 bits by the flags, conv1 at 8, fc3 float.
const char* kMixed = R"({"rules": [{"path": "conv1", "qconfig": {"bits": 8}}, {"path": "fc3", "qconfig": "none"}]})";
// 8 bits, fc3 float: what ONNX can express.
const char* kOnnxable = R"({"rules": [{"path": "fc3", "qconfig": "none"}]})";

class QConfigCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qflow_qconfig_cli_" + std::to_string(::getpid()));
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
  /// Writes `text` to DIR/name; returns the path.
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

// The dot statement of node `name`: `  "name" [...];`.
std::string dot_node(const std::string& dot, const std::string& name) {
  const size_t begin = dot.find("  \"" + name + "\" [");
  return begin == std::string::npos ? "" : dot.substr(begin, dot.find(";\n", begin) - begin);
}

}  // namespace

TEST_F(QConfigCliTest, GraphDrawsEachLayerAtItsBitsAndRefusesBadFiles) {
  std::string out;
  ASSERT_EQ(run(tool("qflow-graph") + kLenet + " --stage deploy --bits 4 --qconfig " + write("m.json", kMixed) +
                    " --out " + path("d.dot"),
                out),
            0)
      << out;
  const std::string dot = read(path("d.dot"));
  EXPECT_THAT(dot_node(dot, "conv1"), HasSubstr("DConv2d (conv1)\\n[1, 6, 28, 28] float32\\nbits=8 "));
  EXPECT_THAT(dot_node(dot, "conv2"), HasSubstr("bits=4 "));
  EXPECT_THAT(dot_node(dot, "conv2"), HasSubstr("\\nruns int8\""));  // 4-bit integers fit int8
  EXPECT_THAT(dot_node(dot, "fc3"), HasSubstr("Linear (fc3)"));
  EXPECT_THAT(out, HasSubstr(" 2 DConv2d, 2 DLinear,"));
  // A path that names no layer, a bad regex, an unknown key: refused with the place and reason.
  const std::pair<const char*, const char*> bad[] = {
      {R"({"rules": [{"path": "conv9", "qconfig": "none"}]})",
       "rule path 'conv9' selects no layer the pass quantizes; the 5 such layers include conv1 (Conv2d), conv2 (Conv2d)"},
      {R"({"rules": [{"path_regex": "fc[", "qconfig": "none"}]})", "rule path_regex 'fc[': not a valid regular expression"},
      {R"({"global": {"bits": 4}, "rule": []})", "m.json: top level: unknown key \"rule\""},
      {R"({"global": {"bits": 40}})", "m.json: global: QConfig: bits must be in 2..16, got 40"},
  };
  for (const auto& [text, message] : bad) {
    EXPECT_NE(run(tool("qflow-graph") + kLenet + " --stage qat --qconfig " + write("m.json", text) + " --out " +
                      path("q.dot"),
                  out),
              0)
        << text;
    EXPECT_THAT(out, HasSubstr(message)) << text;
  }
}

TEST_F(QConfigCliTest, ExportWritesFloatLayersFloatAndRefusesFourBitsAndAnotherMapping) {
  // A QAT checkpoint made under the mapping, recorded as qflow-train records it.
  manual_seed(0);  // the tool's --seed 0 builds the same float model
  auto model = models::create("lenet5", {.in_channels = 1, .image_size = 28});
  model->eval();
  const Tensor example = randn({1, 1, 28, 28});
  auto float_gm = fx::symbolic_trace(model, example);
  const auto mapping = quant::QConfigMapping::from_json(kOnnxable);
  auto qat = quant::quantization_aware_training(*float_gm, example, mapping);
  quant::calibrate(*qat, std::vector<Tensor>{randn({8, 1, 28, 28})});
  nn::save(qat->state_dict(), path("qat.safetensors"),
           {{"quant", "qat " + quant::to_string(mapping.global())}, {"qconfig_mapping", mapping.to_json()}});
  const std::string file = path("m.onnx");
  const std::string deploy = tool("qflow-export") + kLenet + " --stage deploy --checkpoint " + path("qat.safetensors");
  std::string out;
  ASSERT_EQ(run(deploy + " --qconfig " + write("m.json", kOnnxable) + " --out " + file + " --batch 2 --save-example " +
                    path("ex"),
                out),
            0)
      << out;
  // Four quantized layers (input Q/DQ, weight DQ each); fc3 a float Gemm.
  EXPECT_THAT(out, HasSubstr("(2 Conv, 8 DequantizeLinear, 1 Flatten, 3 Gemm, 2 MaxPool, 4 QuantizeLinear, 4 Relu)"));
  EXPECT_EQ(run("/usr/bin/python3 " + std::string(QFLOW_SOURCE_DIR) + "/tests/onnx/check_onnx.py " + file, out), 0) << out;
  ASSERT_EQ(run("node " + std::string(QFLOW_SOURCE_DIR) + "/tools/onnxruntime/run_onnx.js " + file + " " + path("ex") +
                    "/input.bin 2,1,28,28 " + path("ex") + "/output.bin " + path("ex") + "/expected.bin",
                out),
            0)
      << out;
  EXPECT_LT(json::parse(out)["max_rel_diff"].get<double>(), 1e-2);
  // The flags alone would quantize fc3, which the checkpoint trained float.
  EXPECT_NE(run(deploy + " --out " + file, out), 0);
  EXPECT_THAT(out, HasSubstr("was trained with layer 'fc3' at float (its QConfig mapping's path 'fc3'), but the flags "
                             "and --qconfig give it QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true "
                             "(their global)"));
  // 4 bits for conv2 (a checkpoint without a recorded mapping): ONNX cannot express it.
  const auto four = quant::QConfigMapping::from_json(R"({"rules": [{"path": "conv2", "qconfig": {"bits": 4}}]})");
  auto qat4 = quant::quantization_aware_training(*float_gm, example, four);
  quant::calibrate(*qat4, std::vector<Tensor>{randn({8, 1, 28, 28})});
  nn::save(qat4->state_dict(), path("qat4.safetensors"));
  EXPECT_NE(run(tool("qflow-export") + kLenet + " --stage deploy --checkpoint " + path("qat4.safetensors") +
                    " --qconfig " + write("four.json", four.to_json()) + " --out " + file,
                out),
            0);
  EXPECT_THAT(out, HasSubstr("node %conv2 (call_module[target=conv2]): the quantization grid [-8, 7] cannot be "
                             "expressed at opset 13"));
}

TEST_F(QConfigCliTest, TrainRecordsTheMappingAndResumeRefusesAnother) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = path("run");
  const std::string train = tool("qflow-train") +
                            "--model lenet5 --dataset fashion-mnist --subset 192 --test-subset 64 --epochs 2 "
                            "--batch-size 64 --lr 0.05 --workers 1 --threads 1 --qat --bits 4 --checkpoint-dir " + dir;
  const std::string mixed = write("mixed.json", kMixed);
  std::string out;
  ASSERT_EQ(run(train + " --qconfig " + mixed + " --stop-after 1", out), 0) << out;
  EXPECT_THAT(out, HasSubstr("quantization_aware_training: QConfig(bits=4,"));
  EXPECT_THAT(out, HasSubstr("  rule path 'conv1': QConfig(bits=8,"));
  nn::CheckpointMetadata meta;
  (void)nn::load(dir + "/last.safetensors", &meta);
  EXPECT_EQ(meta.at("qconfig_mapping"), quant::QConfigMapping::from_json(kMixed, {.bits = 4}).to_json());
  // Another mapping, or none, is refused; the same one resumes and deploys.
  ASSERT_NE(run(train + " --resume --qconfig " + write("other.json", kOnnxable), out), 0);
  EXPECT_THAT(out, HasSubstr("--resume: " + dir + "/last.safetensors was trained with the QConfig mapping {\"global\""));
  ASSERT_NE(run(train + " --resume", out), 0);
  EXPECT_THAT(out, HasSubstr("but the flags and --qconfig ask for {\"global\""));
  ASSERT_EQ(run(train + " --resume --qconfig " + mixed, out), 0) << out;
  EXPECT_THAT(out, HasSubstr("| lenet5 | QAT (--qconfig)"));
  EXPECT_THAT(out, HasSubstr("| lenet5 | deploy (int8) (--qconfig)"));  // 4- and 8-bit layers run int8
  // --qconfig without quantization is refused.
  EXPECT_NE(run(tool("qflow-train") + "--model lenet5 --dataset fashion-mnist --epochs 1 --qconfig " + mixed +
                    " --checkpoint-dir " + path("float"),
                out),
            0);
  EXPECT_THAT(out, HasSubstr("give it with --qat or --ptq"));
}

// --sensitivity and --mixed-precision (Note [qflow-train --sensitivity]) on a LeNet-5 trained
// for one short epoch: every layer is ranked, the ranking is written as CSV, and the chosen
// mapping is a --qconfig file a QAT run takes. W2A8 makes the drops large enough to rank.
TEST_F(QConfigCliTest, SensitivityRanksTheLayersAndMixedPrecisionWritesAQconfigFile) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string common = tool("qflow-train") +
                             "--model lenet5 --dataset fashion-mnist --test-subset 256 --batch-size 64 --workers 1 "
                             "--threads 1 ";
  std::string out;
  ASSERT_EQ(run(common + "--subset 2048 --epochs 1 --lr 0.05 --no-augment --checkpoint-dir " + path("float"), out), 0)
      << out;
  const std::string weights = path("float") + "/best.safetensors";
  const std::string analyse = common + "--qat-from " + weights + " --bits 2 --activation-bits 8 --calib-batches 2 ";
  ASSERT_EQ(run(analyse + "--sensitivity --checkpoint-dir " + path("s"), out), 0) << out;
  EXPECT_THAT(out, HasSubstr("qflow-train: [1/5] conv1 alone"));
  EXPECT_THAT(out, HasSubstr("accuracy with one layer quantized, the rest float (float model "));
  EXPECT_THAT(out, HasSubstr("W2A8"));
  std::stringstream csv(read(path("s") + "/sensitivity.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "rank,path,type,qconfig,metric,drop");
  std::vector<double> drops;
  std::set<std::string> layers;
  while (std::getline(csv, line)) {
    const size_t last = line.rfind(',');
    drops.push_back(std::stod(line.substr(last + 1)));
    layers.insert(line.substr(line.find(',') + 1, line.find(',', line.find(',') + 1) - line.find(',') - 1));
  }
  EXPECT_EQ(layers, (std::set<std::string>{"conv1", "conv2", "fc1", "fc2", "fc3"}));
  EXPECT_TRUE(std::is_sorted(drops.rbegin(), drops.rend())) << read(path("s") + "/sensitivity.csv");

  // A generous drop is met by the fewest layers at 8 bits; the file is a mapping qflow-train takes.
  const int status = run(analyse + "--mixed-precision 2 --checkpoint-dir " + path("mp"), out);
  ASSERT_TRUE(status == 0 || status == 2) << out;
  EXPECT_THAT(out, HasSubstr("most sensitive layers at 8 bits: accuracy"));
  const std::string file = path("mp") + "/mixed_precision.json";
  const auto mapping = quant::QConfigMapping::from_file(file);
  EXPECT_EQ(mapping.global(), (quant::QConfig{.bits = 2, .activation_bits = 8}));
  for (const quant::QConfigRule& r : mapping.rules()) {
    EXPECT_EQ(r.kind, quant::RuleKind::Path);
    EXPECT_EQ(r.qconfig, (quant::QConfig{.bits = 8, .activation_bits = 8})) << r.pattern;
  }
  if (status == 0) EXPECT_THAT(out, HasSubstr(" <= 2\n"));
  ASSERT_EQ(run(common + "--subset 128 --epochs 1 --qat-from " + weights + " --qconfig " + file +
                    " --checkpoint-dir " + path("qat"),
                out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("| lenet5 | QAT (--qconfig)"));

  // Misuse is refused with the reason.
  EXPECT_NE(run(common + "--sensitivity --checkpoint-dir " + path("x"), out), 0);
  EXPECT_THAT(out, HasSubstr("--sensitivity needs a trained float model: --qat-from FILE"));
  EXPECT_NE(run(analyse + "--qat --sensitivity --checkpoint-dir " + path("x"), out), 0);
  EXPECT_THAT(out, HasSubstr("drop --qat"));
  EXPECT_NE(run(analyse + "--mixed-precision -1 --checkpoint-dir " + path("x"), out), 0);
}
