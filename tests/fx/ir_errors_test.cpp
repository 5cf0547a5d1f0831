// Mistakes on a traced model's IR are refused clearly: targets that do not exist, erasing a
// node still in use; and a mutation of a traced graph (insert, rewire, erase) runs as edited.
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace F = qflow::nn::functional;

namespace {

struct Small : nn::Cloneable<Small> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 1, .out = 2, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 2 * 4 * 4, .out = 3}));
  Tensor forward(const Tensor& x) override {
    Tensor y = F::relu((*conv)(x));
    return (*fc)(y.view({y.size(0), -1}));
  }
};

std::shared_ptr<Small> make_small() {
  manual_seed(13);
  return std::make_shared<Small>();
}

std::unique_ptr<Graph> graph_calling(NodeOp op, const std::string& target) {
  auto g = std::make_unique<Graph>();
  Node* x = g->placeholder("x");
  Node* n = op == NodeOp::GetAttr ? g->get_attr(target) : g->create_node(op, target, {x});
  g->output(n);
  return g;
}

}  // namespace

TEST(IrErrorTest, UnknownTargetsAreRefusedNamingThem) {
  auto root = make_small();
  EXPECT_THAT(error_of([&] { GraphModule(*root, graph_calling(NodeOp::CallModule, "conv2")); }),
              HasSubstr("get_submodule('conv2'): Small has no submodule 'conv2'"));
  EXPECT_THAT(error_of([&] { GraphModule(*root, graph_calling(NodeOp::GetAttr, "conv.scale")); }),
              HasSubstr("GraphModule: get_attr target 'conv.scale' is not a parameter or buffer of Small"));
  EXPECT_THAT(error_of([&] { GraphModule(*root, graph_calling(NodeOp::CallFunction, "relu_typo")); }),
              HasSubstr("call_function %relu_typo has target 'relu_typo', which is not a registered op"));
  EXPECT_THAT(error_of([&] { GraphModule(*root, graph_calling(NodeOp::CallMethod, "no_method")); }),
              HasSubstr("call_method %no_method has target 'no_method', which is not a registered op"));
  // A pass that points a node at a missing module is caught by recompile().
  auto gm = symbolic_trace(root, randn({1, 1, 4, 4}));
  gm->graph().node("fc").set_target("head");
  EXPECT_THAT(error_of([&] { gm->recompile(); }),
              HasSubstr("call_module %fc has target 'head', which is not a submodule of GraphModule"));
}

TEST(IrErrorTest, ErasingAUsedNodeOfATracedModelIsRefusedAndChangesNothing) {
  auto gm = symbolic_trace(make_small(), randn({1, 1, 4, 4}));
  const std::string before = gm->graph().to_string();
  EXPECT_EQ(error_of([&] { gm->graph().erase_node(&gm->graph().node("relu")); }),
            "Graph::erase_node: cannot erase %relu because it is still used by %sym_size, %view (replace those uses first)");
  EXPECT_EQ(gm->graph().to_string(), before);
  EXPECT_NO_THROW(gm->recompile());
}

TEST(IrErrorTest, AnEditedTracedGraphRunsAsEdited) {
  auto model = make_small();
  auto gm = symbolic_trace(model, randn({1, 1, 4, 4}));
  Graph& g = gm->graph();
  Node* conv = &g.node("conv");
  Node* relu = &g.node("relu");
  {
    auto guard = g.inserting_after(conv);
    Node* neg = g.call_function("neg", {conv});
    relu->replace_input_with(conv, neg);  // relu(-conv(x))
  }
  EXPECT_THAT(names_of(conv->users()), ElementsAre("neg"));
  EXPECT_THAT(names_of(g), ElementsAre("x", "conv", "neg", "relu", "sym_size", "view", "fc", "output"));
  EXPECT_NO_THROW(gm->recompile());
  const Tensor x = randn({2, 1, 4, 4});
  NoGradGuard no_grad;
  Tensor y = F::relu((*model->conv)(x).neg());
  EXPECT_TRUE(same_values((*gm)(x), (*model->fc)(y.view({2, -1}))));
  // Undo: rewire and erase the inserted node; the graph runs like the model again.
  g.node("neg").replace_all_uses_with(conv);
  g.erase_node(&g.node("neg"));
  EXPECT_THAT(names_of(conv->users()), ElementsAre("relu"));
  EXPECT_NO_THROW(gm->recompile());
  EXPECT_TRUE(same_values((*gm)(x), (*model)(x)));
}
