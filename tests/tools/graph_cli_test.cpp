// qflow-graph end to end: the dot file holds every node of the traced (or fused, QAT, deploy)
// model with its shapes and quantization info, Graphviz renders it, --print shows the text
// form and code, and quantized weights are drawn by the stages that can hold them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::testing::HasSubstr;
using ::testing::Not;

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

class GraphCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qflow_graph_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs qflow-graph with `args`; `env` prefixes the command (e.g. "PATH=/nonexistent ").
  ToolRun run(const std::string& args, const std::string& env = "") const {
    const std::string log = (dir_ / "out.txt").string();
    const std::string cmd = env + std::string(QFLOW_BIN_DIR) + "/qflow-graph " + args + " > " + log + " 2>&1";
    ToolRun r;
    const int raw = std::system(cmd.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.output = read_file(log);
    return r;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

bool have_dot() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

// Node statements of a dot file written by fx::to_dot: `  "name" [shape=...];`.
size_t dot_nodes(const std::string& dot) {
  size_t n = 0;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  \"", 0) == 0 && line.find("\" [shape=") != std::string::npos) ++n;
  return n;
}

size_t traced_resnet18_nodes() {
  return fx::symbolic_trace(models::create("resnet18"), randn({1, 3, 32, 32}))->graph().size();
}

}  // namespace

TEST_F(GraphCliTest, WritesTheFloatGraphWithShapesAndGraphvizRendersIt) {
  const bool dot = have_dot();
  const ToolRun r = run("--model resnet18 --out " + path("r18.dot") + (dot ? " --svg --png" : ""));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(path("r18.dot"));
  EXPECT_EQ(dot_nodes(text), traced_resnet18_nodes());
  EXPECT_THAT(text, HasSubstr("label=\"resnet18 (float)\""));
  EXPECT_THAT(text, HasSubstr("label=\"x\\ninput\\n[1, 3, 32, 32] float32\""));
  EXPECT_THAT(text, HasSubstr("conv1\\nConv2d (conv1)\\n[1, 64, 32, 32] float32"));
  EXPECT_THAT(text, HasSubstr("layer4_1_bn2\\nBatchNorm2d (layer4.1.bn2)\\n[1, 512, 4, 4] float32"));
  EXPECT_THAT(text, HasSubstr("linear\\nLinear (linear)\\n[1, 10] float32"));
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: resnet18 (float), "));
  EXPECT_THAT(r.output, HasSubstr(" 20 BatchNorm2d, 20 Conv2d, 1 Linear,"));
  if (!dot) GTEST_SKIP() << "Graphviz's dot is not installed: rendering not checked";
  EXPECT_THAT(read_file(path("r18.svg")), HasSubstr("<svg"));
  EXPECT_THAT(read_file(path("r18.svg")), HasSubstr("layer4_1_conv2"));
  EXPECT_EQ(read_file(path("r18.png")).substr(1, 3), "PNG");
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: wrote " + path("r18.png")));
}

TEST_F(GraphCliTest, TheFusedStageHasNoBatchNormLeft) {
  const ToolRun r = run("--model resnet18 --stage fused --out " + path("fused.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(path("fused.dot"));
  EXPECT_EQ(dot_nodes(text), traced_resnet18_nodes() - 20);
  EXPECT_THAT(text, Not(HasSubstr("BatchNorm2d")));
  EXPECT_THAT(text, HasSubstr("label=\"resnet18 (fused)\""));
  EXPECT_THAT(text, HasSubstr("layer1_0_conv1\\nConv2d (layer1.0.conv1)\\n[1, 64, 32, 32] float32"));
  EXPECT_THAT(text, HasSubstr("\"layer1_0_conv1\" -> \"relu_1\";"));  // the relu reads the fused conv
  if (have_dot()) {
    EXPECT_EQ(std::system(("dot -Tsvg " + path("fused.dot") + " -o /dev/null").c_str()), 0);
  }
}

TEST_F(GraphCliTest, ModelOptionsShapeTheExampleAndPrintShowsTextAndCode) {
  const ToolRun r = run("--model lenet5 --in-channels 1 --image-size 28 --num-classes 7 --batch 2 --print --out " +
                    path("sub/lenet.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(path("sub/lenet.dot"));
  EXPECT_THAT(text, HasSubstr("[2, 1, 28, 28] float32"));
  EXPECT_THAT(text, HasSubstr("[2, 7] float32"));
  EXPECT_THAT(r.output, HasSubstr("graph():\n    %x : [#users=1] = placeholder[target=x]\n"));
  EXPECT_THAT(r.output, HasSubstr("def forward(self, x):\n"));
  EXPECT_THAT(r.output, HasSubstr("    return "));
}

TEST_F(GraphCliTest, LoadsWeightsOfTheSameArchitectureOnly) {
  nn::save(models::create("lenet5", {.in_channels = 1, .image_size = 28})->state_dict(), path("lenet.safetensors"));
  ToolRun r = run("--model lenet5 --in-channels 1 --image-size 28 --stage fused --weights " + path("lenet.safetensors") +
                  " --out " + path("w.dot"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(path("w.dot")));
  r = run("--model lenet5 --weights " + path("lenet.safetensors") + " --out " + path("bad.dot"));  // 3 input channels
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: error: "));
  EXPECT_THAT(r.output, HasSubstr("conv1.weight"));
  EXPECT_FALSE(std::filesystem::exists(path("bad.dot")));
}

TEST_F(GraphCliTest, WithoutGraphvizTheDotFileIsWrittenAndThePictureRefusedClearly) {
  const ToolRun r = run("--model lenet5 --png --out " + path("l.dot"), "PATH=/nonexistent ");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: wrote " + path("l.dot")));
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: error: Graphviz's `dot` is not installed, so no png was made "
                                  "(install it: apt-get install graphviz)"));
  EXPECT_EQ(dot_nodes(read_file(path("l.dot"))), 14u);  // x, 2 conv, 2 pool, 4 relu, flatten, 3 linear, output
  EXPECT_FALSE(std::filesystem::exists(path("l.png")));
}

TEST_F(GraphCliTest, QatStageDrawsTheQuantizedModulesWithBitsSchemeAndScales) {
  const ToolRun r = run("--model resnet18 --stage qat --out " + path("qat.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(path("qat.dot"));
  EXPECT_EQ(dot_nodes(text), traced_resnet18_nodes() - 20);  // every BatchNorm2d folded into its QConvBN
  EXPECT_THAT(text, Not(HasSubstr("BatchNorm2d")));
  EXPECT_THAT(text, HasSubstr("label=\"resnet18 (qat)\""));
  EXPECT_THAT(text, HasSubstr("conv1\\nQConvBN (conv1)\\n[1, 64, 32, 32] float32\\nbits=8 formula=google "
                              "granularity=per-layer input_scale="));
  EXPECT_THAT(text, HasSubstr("linear\\nQLinear (linear)\\n[1, 10] float32\\nbits=8"));
  EXPECT_THAT(text, HasSubstr("scheme=symmetric weight_scale="));
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: resnet18 (qat), "));
  EXPECT_THAT(r.output, HasSubstr(" 20 QConvBN, 1 QLinear,"));
}

TEST_F(GraphCliTest, DeployStageDrawsFixedScalesPerChannel) {
  const ToolRun r = run("--model lenet5 --in-channels 1 --image-size 28 --stage deploy --scheme affine --per-channel --bits 4 "
                        "--out " + path("deploy.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = read_file(path("deploy.dot"));
  EXPECT_EQ(dot_nodes(text), 14u);  // the float graph's 14 nodes, each module swapped in place
  EXPECT_THAT(text, HasSubstr("conv1\\nDConv2d (conv1)\\n[1, 6, 28, 28] float32\\nbits=4 formula=google "
                              "granularity=per-channel input_scale="));
  EXPECT_THAT(text, HasSubstr("input_zero_point="));
  EXPECT_THAT(text, HasSubstr("scheme=affine weight_scale="));
  EXPECT_THAT(text, HasSubstr(" (6 ch)\\nruns float: the weights have a zero point (affine weights)\""));
  EXPECT_THAT(r.output, HasSubstr(" 2 DConv2d, 3 DLinear,"));
}

// The dot statement of node `name`: `  "name" [...];`.
std::string dot_node(const std::string& dot, const std::string& name) {
  const size_t begin = dot.find("  \"" + name + "\" [");
  if (begin == std::string::npos) return "";
  return dot.substr(begin, dot.find(";\n", begin) - begin);
}

TEST_F(GraphCliTest, DeployStageSaysWhichLayersRunInt8AndWhyOthersDoNot) {
  const std::string lenet = "--model lenet5 --in-channels 1 --image-size 28 --stage deploy ";
  const char* int8_fill = "fillcolor=\"#b7e1a1\"";
  const char* float_fill = "fillcolor=\"#f9c68f\"";
  // Symmetric 8-bit weights: every convolution and linear layer runs the int8 kernels.
  ToolRun r = run(lenet + "--out " + path("int8.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::string text = read_file(path("int8.dot"));
  for (const char* layer : {"conv1", "conv2", "fc1", "fc2", "fc3"}) {
    const std::string node = dot_node(text, layer);
    EXPECT_THAT(node, HasSubstr(" kernel=int8 ")) << layer;
    EXPECT_THAT(node, HasSubstr("\\nruns int8\"")) << layer;
    EXPECT_THAT(node, HasSubstr(int8_fill)) << layer;
  }
  EXPECT_THAT(dot_node(text, "relu"), Not(HasSubstr("kernel=")));  // only deployed layers say
  // Affine weights have a zero point the int8 kernels refuse; 12 bits do not fit int8.
  const std::pair<const char*, const char*> floats[] = {
      {"--scheme affine", "runs float: the weights have a zero point (affine weights)"},
      {"--bits 12", "runs float: 12 bits do not fit int8"},
  };
  for (const auto& [flags, why] : floats) {
    r = run(lenet + flags + " --out " + path("float.dot"));
    ASSERT_EQ(r.status, 0) << r.output;
    text = read_file(path("float.dot"));
    const std::string node = dot_node(text, "conv1");
    EXPECT_THAT(node, HasSubstr(" kernel=float ")) << flags;
    EXPECT_THAT(node, HasSubstr(std::string("\\n") + why + "\"")) << flags;
    EXPECT_THAT(node, HasSubstr(float_fill)) << flags;
    EXPECT_THAT(text, Not(HasSubstr(int8_fill))) << flags;
  }
}

TEST_F(GraphCliTest, QuantizedWeightsGoToTheStagesThatCanDrawThem) {
  // A QAT lenet5 whose observers saw one batch, saved as qflow-train --qat saves it.
  auto lenet = fx::symbolic_trace(models::create("lenet5", {.in_channels = 1, .image_size = 28}), randn({1, 1, 28, 28}));
  auto qat = quant::quantization_aware_training(*lenet, randn({1, 1, 28, 28}), {});
  quant::calibrate(*qat, std::vector<Tensor>{randn({4, 1, 28, 28}) * 3.0});
  nn::save(qat->state_dict(), path("qat.safetensors"));
  const float scale = qat->get_submodule<quant::QConv2d>("conv2")->input_observer->calculate_qparams().scale.item<float>();
  const std::string lenet_flags = "--model lenet5 --in-channels 1 --image-size 28 --weights ";

  ToolRun r = run(lenet_flags + path("qat.safetensors") + " --stage qat --out " + path("q.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(read_file(path("q.dot")), HasSubstr(fmt::format("input_scale={:.6g} ", scale)));
  r = run(lenet_flags + path("qat.safetensors") + " --stage deploy --out " + path("d.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(read_file(path("d.dot")), HasSubstr(fmt::format("input_scale={:.6g} ", scale)));
  // The deploy model's own file draws the same scales.
  auto deploy = quant::dequantization_aware_training(*lenet, *qat, randn({1, 1, 28, 28}), {});
  nn::save(deploy->state_dict(), path("deploy.safetensors"));
  r = run(lenet_flags + path("deploy.safetensors") + " --stage deploy --out " + path("d2.dot"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(read_file(path("d2.dot")), HasSubstr(fmt::format("input_scale={:.6g} ", scale)));
  // Quantized weights cannot be drawn as a float model, nor deploy weights as a QAT model.
  r = run(lenet_flags + path("qat.safetensors") + " --stage float --out " + path("f.dot"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: error: --weights holds a QAT model's state, which the float stage cannot draw"));
  r = run(lenet_flags + path("deploy.safetensors") + " --stage qat --out " + path("f.dot"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--weights holds a deploy model's state, which the qat stage cannot draw"));
  // A QConfig other than the weights' is a shape mismatch on the per-channel scales.
  r = run(lenet_flags + path("deploy.safetensors") + " --stage deploy --per-channel --out " + path("f.dot"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("weight_scale"));
  EXPECT_FALSE(std::filesystem::exists(path("f.dot")));
}

TEST_F(GraphCliTest, HelpAndBadFlags) {
  ToolRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("--stage"));
  EXPECT_THAT(r.output, HasSubstr("fused   Conv2d+BatchNorm2d folded for inference"));
  EXPECT_THAT(r.output, HasSubstr("resnet18"));
  r = run("--model resnet19");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("resnet19"));
  r = run("--stage quantized");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("quantized"));
}

namespace {

const char* kFashionImages = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";

// Data lines of a CSV (the header not counted).
size_t csv_rows(const std::string& csv) { return static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')) - 1; }

}  // namespace

TEST_F(GraphCliTest, CompareWritesTheCsvTheSqnrColouredGraphAndTheWorstLayers) {
  if (!std::filesystem::exists(kFashionImages)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  manual_seed(1);
  nn::save(models::create("lenet5", {.in_channels = 1, .image_size = 28})->state_dict(), path("lenet.safetensors"));
  const bool dot = have_dot();
  // Float weights: the deploy model is calibrated on 2 training batches, then compared on 2 test batches.
  const ToolRun r = run("--model lenet5 --in-channels 1 --image-size 28 --stage deploy --weights " +
                        path("lenet.safetensors") + " --compare fashion-mnist --batch 16 --compare-batches 2 "
                        "--calib-batches 2 --worst 3 --out " + path("cmp/lenet.dot") + (dot ? " --png" : ""));
  ASSERT_EQ(r.status, 0) << r.output;
  // Every node but the input, the output and sym_size (an integer): 2 conv, 3 linear, 4 relu, 2 pool, flatten.
  const std::string csv = read_file(path("cmp/lenet.csv"));
  EXPECT_EQ(csv_rows(csv), 12u) << csv;
  EXPECT_THAT(csv, HasSubstr("node,reference,what,elements,sqnr_db,cosine,max_abs_error,local_sqnr_db,weight_sqnr_db\n"
                             "conv1,conv1,\"DConv2d (conv1)\",150528,"));  // 2 batches x 16 x 6 x 28 x 28
  EXPECT_THAT(csv, HasSubstr("\nrelu,relu,\"relu\",150528,"));
  const std::string text = read_file(path("cmp/lenet.dot"));
  EXPECT_THAT(text, HasSubstr("label=\"lenet5 (deploy)\\nSQNR vs float, 2 test batches of fashion-mnist (32 images): "
                              "green >= 30 dB, yellow 20-30, orange 10-20, red < 10\""));
  const std::string conv1 = dot_node(text, "conv1");
  EXPECT_THAT(conv1, HasSubstr("\\nruns int8\\nSQNR "));  // the kernel's caption, then the numbers
  EXPECT_THAT(conv1, HasSubstr(" dB (alone "));
  EXPECT_THAT(conv1, HasSubstr(" dB), weight "));
  EXPECT_THAT(conv1, ::testing::AnyOf(HasSubstr("fillcolor=\"#b7e1a1\""), HasSubstr("fillcolor=\"#fff2a8\"")));
  EXPECT_THAT(dot_node(text, "x"), Not(HasSubstr("SQNR")));  // inputs are not compared
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: wrote " + path("cmp/lenet.csv")));
  // The worst-layer table: a title, a header and --worst rows.
  const size_t table = r.output.find("the 3 of 12 nodes with the lowest SQNR alone");
  ASSERT_NE(table, std::string::npos) << r.output;
  EXPECT_THAT(r.output.substr(table), HasSubstr("\nnode   module / op      alone dB  SQNR dB    cosine  max |err|  weight dB\n"));
  EXPECT_EQ(std::count(r.output.begin() + static_cast<std::ptrdiff_t>(table), r.output.end(), '\n'), 5) << r.output;
  if (!dot) GTEST_SKIP() << "Graphviz's dot is not installed: the PNG not checked";
  EXPECT_EQ(read_file(path("cmp/lenet.png")).substr(1, 3), "PNG");
}

TEST_F(GraphCliTest, CompareTakesItsFloatReferenceFromTheWeightsOrRefusesClearly) {
  if (!std::filesystem::exists(kFashionImages)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto lenet = fx::symbolic_trace(models::create("lenet5", {.in_channels = 1, .image_size = 28}), randn({1, 1, 28, 28}));
  auto qat = quant::quantization_aware_training(*lenet, randn({1, 1, 28, 28}), {});
  quant::calibrate(*qat, std::vector<Tensor>{randn({4, 1, 28, 28})});
  nn::save(qat->state_dict(), path("qat.safetensors"));
  nn::save(quant::dequantization_aware_training(*lenet, *qat, randn({1, 1, 28, 28}), {})->state_dict(),
           path("deploy.safetensors"));
  const std::string flags = "--model lenet5 --in-channels 1 --image-size 28 --compare fashion-mnist --batch 8 "
                            "--compare-batches 1 --out " + path("c.dot") + " ";
  // QAT weights alone: the reference is the same model with fake quantization off.
  ToolRun r = run(flags + "--stage qat --weights " + path("qat.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(read_file(path("c.csv")), HasSubstr("\nconv1,conv1,\"QConv2d (conv1)\",37632,"));  // 8 x 6 x 28 x 28
  r = run(flags + "--stage deploy --weights " + path("deploy.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: error: --compare with deploy --weights needs --float-weights FILE"));
  r = run(flags + "--stage deploy --weights " + path("deploy.safetensors") + " --float-weights " + path("qat.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--float-weights " + path("qat.safetensors") + " holds a quantized model's state"));
  r = run(flags + "--stage float");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("qflow-graph: error: --compare compares a quantized model with its float one: pass "
                                  "--stage qat or --stage deploy (not float)"));
  r = run("--model lenet5 --stage deploy --compare fashion-mnist --out " + path("c3.dot"));  // 3 channels of 32x32
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("--compare fashion-mnist: its images are 1 channel(s) of 28x28, the model takes 3 of "
                                  "32x32 (pass --in-channels 1 --image-size 28)"));
}
