// GraphModule (paths, state_dict, surgery, clone, code) and the Interpreter/ShapeProp.
#include <memory>

#include "fx_test_util.h"

using namespace qflow;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace F = qflow::nn::functional;

namespace {

struct Block : nn::Cloneable<Block> {
  std::shared_ptr<nn::Conv2d> conv = register_module("conv", nn::Conv2d({.in = 2, .out = 2, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn = register_module("bn", nn::BatchNorm2d({.features = 2}));
  Tensor gain = register_parameter("gain", full({1}, 0.5));
  Tensor forward(const Tensor& x) override { return F::relu((*bn)((*conv)(x))) * gain + x; }
};

struct Model : nn::Cloneable<Model> {
  Tensor bias = register_parameter("bias", full({1}, 0.25));
  std::shared_ptr<nn::Sequential> layers =
      register_module("layers", std::make_shared<nn::Sequential>(std::make_shared<Block>(), std::make_shared<Block>()));
  std::shared_ptr<nn::Linear> head = register_module("head", nn::Linear({.in = 2 * 3 * 3, .out = 3}));
  Tensor forward(const Tensor& x) override {
    Tensor y = (*layers)(x) + bias;
    return (*head)(y.view({y.size(0), -1}));
  }
};

std::shared_ptr<Model> make_model() {
  manual_seed(3);
  return std::make_shared<Model>();
}

std::shared_ptr<fx::GraphModule> trace(const std::shared_ptr<nn::Module>& m) {
  return fx::symbolic_trace(m, randn({2, 2, 3, 3}));
}

}  // namespace

TEST(GraphModuleTest, KeepsDottedPathsAndTheStateDictKeysInOrder) {
  auto model = make_model();
  auto gm = trace(model);
  EXPECT_EQ(gm->state_dict().keys(), model->state_dict().keys());
  EXPECT_EQ(gm->get_submodule("layers.1.conv").get(), model->layers->at<Block>(1)->conv.get());
  EXPECT_EQ(gm->get_submodule("layers")->type_name(), "Module");  // a container, not the Sequential
  EXPECT_TRUE(gm->get_attr("layers.0.gain").is_same(model->layers->at<Block>(0)->gain));
  EXPECT_EQ(gm->graph().node("layers_0_conv").target(), "layers.0.conv");
  EXPECT_TRUE(gm->is_training());
  model->eval();
  EXPECT_FALSE(trace(model)->is_training());
}

TEST(GraphModuleTest, RunsLikeTheModelAndTrainsItsParameters) {
  auto model = make_model();
  auto gm = trace(model);
  const Tensor x = randn({4, 2, 3, 3});
  for (bool training : {true, false}) {
    gm->train(training);
    model->train(training);
    model->zero_grad();
    (*model)(x).sum().backward();
    std::vector<std::vector<float>> eager;
    for (const Tensor& p : model->parameters()) eager.push_back(to_vector<float>(p.grad()));
    model->zero_grad();
    const Tensor out = (*gm)(x);
    EXPECT_TRUE(same_values(out, (*model)(x).detach()));
    out.sum().backward();
    size_t i = 0;
    for (const Tensor& p : model->parameters()) EXPECT_EQ(to_vector<float>(p.grad()), eager[i++]);
  }
}

TEST(GraphModuleTest, AddReplaceAndDeleteSubmodulesByPath) {
  auto gm = trace(make_model());
  gm->add_submodule("extra.deep.act", std::make_shared<nn::ReLU>());
  EXPECT_EQ(gm->get_submodule("extra")->type_name(), "Module");
  EXPECT_EQ(gm->get_submodule("extra.deep.act")->type_name(), "ReLU");
  // Replacing keeps the position, so state_dict order does not change.
  const auto keys = gm->state_dict().keys();
  auto fresh = std::make_shared<nn::Conv2d>(nn::Conv2dOptions{.in = 2, .out = 2, .kernel = 1});
  gm->add_submodule("layers.0.conv", fresh);
  EXPECT_EQ(gm->get_submodule("layers.0.conv").get(), fresh.get());
  EXPECT_EQ(gm->state_dict().keys(), keys);
  EXPECT_TRUE(gm->delete_submodule("extra.deep.act"));
  EXPECT_FALSE(gm->delete_submodule("extra.deep.act"));
  EXPECT_FALSE(gm->delete_submodule("no.such.path"));
  EXPECT_NO_THROW(gm->recompile());
  EXPECT_TRUE(gm->delete_submodule("head"));
  EXPECT_THAT(error_of([&] { gm->recompile(); }),
              HasSubstr("call_module %head has target 'head', which is not a submodule of GraphModule"));
}

TEST(GraphModuleTest, DeleteAllUnusedSubmodulesAfterARewrite) {
  auto gm = trace(make_model());
  // Bypass layers.1.bn: its conv feeds the relu directly.
  fx::Node& bn = gm->graph().node("layers_1_bn");
  bn.replace_all_uses_with(bn.args()[0].node());
  gm->graph().erase_node(&bn);
  gm->add_submodule("unused", std::make_shared<nn::ReLU>());
  gm->delete_all_unused_submodules();
  EXPECT_FALSE(error_of([&] { gm->get_submodule("layers.1.bn"); }).empty());
  EXPECT_FALSE(error_of([&] { gm->get_submodule("unused"); }).empty());
  EXPECT_EQ(gm->get_submodule("layers.1.conv")->type_name(), "Conv2d");
  EXPECT_NO_THROW(gm->recompile());
  const auto keys = gm->state_dict().keys();
  EXPECT_EQ(std::count_if(keys.begin(), keys.end(), [](const std::string& k) { return k.rfind("layers.1.bn.", 0) == 0; }), 0);
}

TEST(GraphModuleTest, CloneIsDeepAndRunsTheSame) {
  auto model = make_model();
  auto gm = trace(model);
  auto copy = std::dynamic_pointer_cast<fx::GraphModule>(gm->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->graph().to_string(), gm->graph().to_string());
  EXPECT_EQ(copy->state_dict().keys(), gm->state_dict().keys());
  EXPECT_NE(copy->get_submodule("head").get(), gm->get_submodule("head").get());
  const Tensor x = randn({3, 2, 3, 3});
  {
    NoGradGuard no_grad;
    copy->eval();
    gm->eval();
    EXPECT_TRUE(same_values((*copy)(x), (*gm)(x)));
    copy->get_attr("bias").fill_(10.0);
  }
  EXPECT_EQ(to_vector<float>(model->bias), (std::vector<float>{0.25f}));
  EXPECT_NE(&copy->graph(), &gm->graph());
}

TEST(GraphModuleTest, CodeIsReadableStraightLineCode) {
  auto gm = trace(make_model());
  EXPECT_EQ(gm->code(),
            "def forward(self, x):\n"
            "    layers_0_conv = self.layers[0].conv(x)\n"
            "    layers_0_bn = self.layers[0].bn(layers_0_conv)\n"
            "    relu = qflow.relu(layers_0_bn)\n"
            "    layers_0_gain = self.layers[0].gain\n"
            "    mul = qflow.mul(relu, layers_0_gain)\n"
            "    add = qflow.add(mul, x)\n"
            "    layers_1_conv = self.layers[1].conv(add)\n"
            "    layers_1_bn = self.layers[1].bn(layers_1_conv)\n"
            "    relu_1 = qflow.relu(layers_1_bn)\n"
            "    layers_1_gain = self.layers[1].gain\n"
            "    mul_1 = qflow.mul(relu_1, layers_1_gain)\n"
            "    add_1 = qflow.add(mul_1, add)\n"
            "    bias = self.bias\n"
            "    add_2 = qflow.add(add_1, bias)\n"
            "    sym_size = qflow.sym_size(add_2, 0)\n"
            "    view = qflow.view(add_2, [sym_size, -1])\n"
            "    head = self.head(view)\n"
            "    return head\n");
}

TEST(InterpreterTest, OneOverridableMethodPerNodeKind) {
  struct Recorder : fx::Interpreter {
    using Interpreter::Interpreter;
    std::vector<std::string> seen;
    Stack call_module(fx::Node& n, const Stack& a, const fx::ValueKwargs& k) override {
      seen.push_back("module " + n.target());
      return Interpreter::call_module(n, a, k);
    }
    Stack call_function(fx::Node& n, const Stack& a, const fx::ValueKwargs& k) override {
      seen.push_back("function " + n.target());
      if (n.target() == "relu") return Stack{Value(a[0].tensor().neg())};  // a pass may change behaviour
      return Interpreter::call_function(n, a, k);
    }
    Stack get_attr(fx::Node& n) override {
      seen.push_back("attr " + n.target());
      return Interpreter::get_attr(n);
    }
  };
  struct Small : nn::Cloneable<Small> {
    std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 2, .out = 2}));
    Tensor scale = register_parameter("scale", full({1}, 2.0));
    Tensor forward(const Tensor& x) override { return F::relu((*fc)(x)) * scale; }
  };
  auto small = std::make_shared<Small>();
  auto gm = fx::symbolic_trace(small, randn({1, 2}));
  Recorder r(*gm);
  const Tensor x = randn({3, 2});
  NoGradGuard no_grad;
  const TensorList out = r.run(x);
  EXPECT_THAT(r.seen, ElementsAre("module fc", "function relu", "attr scale", "function mul"));
  EXPECT_TRUE(same_values(out[0], (*small->fc)(x).neg() * 2.0));
}

TEST(InterpreterTest, ValuesAreFreedAfterTheirLastUse) {
  struct Watcher : fx::Interpreter {
    using Interpreter::Interpreter;
    std::weak_ptr<TensorImpl> first;
    bool freed_before_last = false;
    Stack call_function(fx::Node& n, const Stack& a, const fx::ValueKwargs& k) override {
      if (n.name() == "exp") freed_before_last = first.expired();
      Stack out = Interpreter::call_function(n, a, k);
      if (n.name() == "relu") first = out[0].tensor().impl_ptr();
      return out;
    }
  };
  fx::Graph g;
  fx::Node* x = g.placeholder("x");
  fx::Node* a = g.call_function("relu", {x});
  fx::Node* b = g.call_function("neg", {a});
  g.output(g.call_function("exp", {b}));
  auto gm = std::make_shared<fx::GraphModule>(*std::make_shared<nn::Sequential>(), g.clone());
  Watcher w(*gm);
  NoGradGuard no_grad;
  w.run(randn({4}));
  EXPECT_TRUE(w.freed_before_last);
}

TEST(InterpreterTest, ErrorsNameTheNodeThatFailed) {
  auto gm = trace(make_model());
  EXPECT_THAT(error_of([&] { (*gm)(randn({2, 5, 3, 3})); }),
              HasSubstr("while executing %layers_0_conv : [#users=1] = call_module[target=layers.0.conv](args = (%x,), "
                        "kwargs = {}): "));
  EXPECT_THAT(error_of([&] { gm->call({randn({2, 2, 3, 3}), randn({1})}); }),
              HasSubstr("GraphModule: forward takes 1 input (x), got 2"));
  gm->graph().node("relu").set_target("no_such_op");
  EXPECT_THAT(error_of([&] { (*gm)(randn({2, 2, 3, 3})); }),
              HasSubstr("while executing %relu : [#users=1] = call_function[target=no_such_op](args = (%layers_0_bn,), "
                        "kwargs = {}): unknown op 'no_such_op'"));
}

TEST(InterpreterTest, KeywordArgumentsAndDefaultsAreBound) {
  const OpDef& add = OpRegistry::instance().get("add");
  const Stack bound = fx::bind_arguments(add.schema, {ones({1}), ones({1})}, {{"alpha", Value(3)}});
  ASSERT_EQ(bound.size(), 3u);
  EXPECT_EQ(bound[2].to_int(), 3);
  EXPECT_EQ(fx::bind_arguments(add.schema, {ones({1}), ones({1})}, {})[2].scalar().to_int(), 1);
  EXPECT_THAT(error_of([&] { fx::bind_arguments(add.schema, {ones({1}), ones({1})}, {{"beta", Value(1)}}); }),
              HasSubstr("add: unexpected keyword argument 'beta'"));
  EXPECT_THAT(error_of([&] { fx::bind_arguments(add.schema, {ones({1})}, {}); }),
              HasSubstr("add: missing argument 'other' (Tensor)"));
  EXPECT_THAT(error_of([&] { fx::bind_arguments(add.schema, {ones({1}), ones({1}), Value(2)}, {{"alpha", Value(3)}}); }),
              HasSubstr("add: argument 'alpha' given both by position and by keyword"));
}

TEST(ShapePropTest, FillsMetaForAnotherBatchAndLeavesStateAlone) {
  auto model = make_model();
  auto gm = trace(model);
  std::vector<std::vector<double>> buffers;
  for (const Tensor& b : model->buffers()) buffers.push_back(to_vector<double>(b));
  fx::ShapeProp(*gm).run(randn({7, 2, 3, 3}));  // train mode: BatchNorm would update its statistics
  EXPECT_EQ(gm->graph().node("x").meta().shape(), (std::vector<int64_t>{7, 2, 3, 3}));
  EXPECT_EQ(gm->graph().node("view").meta().shape(), (std::vector<int64_t>{7, 18}));
  EXPECT_EQ(gm->graph().node("head").meta().shape(), (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(gm->graph().node("head").meta().dtype(), DType::Float32);
  EXPECT_TRUE(gm->graph().node("sym_size").meta().outputs.empty());  // an integer, not a tensor
  EXPECT_EQ(gm->graph().output_node()->meta().shape(), (std::vector<int64_t>{7, 3}));
  size_t i = 0;
  for (const Tensor& b : model->buffers()) EXPECT_EQ(to_vector<double>(b), buffers[i++]);
}
