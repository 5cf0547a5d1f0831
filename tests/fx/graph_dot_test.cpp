// to_dot renders kinds, module types, shapes and quant info, and Graphviz accepts it.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fx_test_util.h"

using namespace qflow;
using namespace fxtest;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct Tiny : nn::Cloneable<Tiny> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 1, .out = 2, .kernel = 3, .padding = 1}));
  Tensor forward(const Tensor& x) override { return nn::functional::relu((*conv)(x)).view({x.size(0), -1}); }
};

bool have_dot() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

}  // namespace

TEST(GraphDotTest, ShowsKindsModuleTypesShapesAndQuantInfo) {
  auto gm = fx::symbolic_trace(std::make_shared<Tiny>(), randn({1, 1, 4, 4}));
  fx::Node& conv = gm->graph().node("conv");
  conv.meta().set("quant.bits", 8.0);
  conv.meta().set("quant.scheme", std::string("symmetric"));
  conv.meta().set("quant.scale", 0.0123);
  conv.meta().set("note", std::string("say \"hi\""));
  const std::string dot = fx::to_dot(*gm);
  EXPECT_THAT(dot, HasSubstr("digraph G {"));
  EXPECT_THAT(dot, HasSubstr("label=\"GraphModule\""));
  EXPECT_THAT(dot, HasSubstr("\"x\" [shape=ellipse, style=\"filled\", fillcolor=\"#d5e8d4\", label=\"x\\ninput\\n[1, 1, 4, 4] float32\"];"));
  EXPECT_THAT(dot, HasSubstr("\"conv\" [shape=box, style=\"rounded,filled\", fillcolor=\"#dae8fc\", label=\"conv\\nConv2d (conv)\\n"
                             "[1, 2, 4, 4] float32\\nbits=8 scale=0.0123 scheme=symmetric\\nnote=say \\\"hi\\\"\", "
                             "color=\"#b85450\", penwidth=2.5];"));
  EXPECT_THAT(dot, HasSubstr("\"relu\" [shape=box, style=\"filled\", fillcolor=\"#fff2cc\", label=\"relu\\ncall_function relu\\n"
                             "[1, 2, 4, 4] float32\"];"));
  EXPECT_THAT(dot, HasSubstr("\"x\" -> \"conv\";"));
  EXPECT_THAT(dot, HasSubstr("\"sym_size\" -> \"view\";"));
  EXPECT_THAT(dot, HasSubstr("\"output\" [shape=ellipse"));
  fx::DotOptions bare;
  bare.show_shapes = false;
  bare.show_meta = false;
  bare.show_constants = true;
  const std::string plain = fx::to_dot(gm->graph(), bare);
  EXPECT_THAT(plain, HasSubstr("label=\"conv\\nconv\"]"));  // no owner: the path only
  EXPECT_THAT(plain, HasSubstr("label=\"view\\ncall_function view\\n[%sym_size, -1]\"]"));
  EXPECT_THAT(plain, Not(HasSubstr("float32")));
}

TEST(GraphDotTest, GraphvizRendersTheZoosResNet18) {
  if (!have_dot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  manual_seed(2);
  auto gm = fx::symbolic_trace(models::create("resnet18"), randn({1, 3, 32, 32}));
  gm->graph().node("conv1").meta().set("quant.bits", 8.0);
  const auto dir = std::filesystem::temp_directory_path() / ("qflow_fx_dot_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto dot_path = dir / "resnet18.dot", svg_path = dir / "resnet18.svg";
  std::ofstream(dot_path) << fx::to_dot(*gm);
  const std::string cmd = "dot -Tsvg " + dot_path.string() + " -o " + svg_path.string() + " 2>" + (dir / "err.txt").string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(std::filesystem::exists(svg_path));
  std::ifstream svg(svg_path);
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("<svg"));
  EXPECT_THAT(text, HasSubstr("layer4_1_conv2"));
  std::ifstream err(dir / "err.txt");
  const std::string warnings((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_EQ(warnings, "");
  std::filesystem::remove_all(dir);
}
