// symbolic_trace on small models: the recorded graph, symbolic sizes, leaves, attributes,
// constants, in-place ops, and the errors for programs that cannot be traced.
#include "fx_test_util.h"

using namespace qflow;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace F = qflow::nn::functional;

namespace {

// Leaves, a parameter used directly, an operator with a non-default keyword argument, a
// multi-output op, a symbolic view and two outputs.
struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 3, .out = 4, .kernel = 3, .padding = 1, .bias = false}));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 4}));
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 4 * 8 * 8, .out = 10}));
  Tensor scale = register_parameter("scale", full({1}, 1.5));
  TensorList forward_list(const TensorList& in) override {
    Tensor y = F::relu((*bn1)((*conv1)(in[0]))) * scale;
    y = add(y, y, 2);
    auto [values, indices] = y.max(1);
    return {(*fc)(y.view({y.size(0), -1})), values};
  }
};

std::shared_ptr<Net> make_net() {
  manual_seed(7);
  return std::make_shared<Net>();
}

template <class F>
struct Lambda : nn::Module {
  explicit Lambda(F f) : f_(std::move(f)) {}
  Tensor forward(const Tensor& x) override { return f_(x); }
  F f_;
};
template <class F>
std::shared_ptr<nn::Module> lambda_module(F f) {
  return std::make_shared<Lambda<F>>(std::move(f));
}

}  // namespace

TEST(TraceTest, RecordsLeavesOpsAttributesAndSymbolicSizes) {
  auto gm = fx::symbolic_trace(make_net(), randn({2, 3, 8, 8}));
  EXPECT_EQ(gm->graph().to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %conv1 : [#users=1] = call_module[target=conv1](args = (%x,), kwargs = {})\n"
            "    %bn1 : [#users=1] = call_module[target=bn1](args = (%conv1,), kwargs = {})\n"
            "    %relu : [#users=1] = call_function[target=relu](args = (%bn1,), kwargs = {})\n"
            "    %scale : [#users=1] = get_attr[target=scale]\n"
            "    %mul : [#users=1] = call_function[target=mul](args = (%relu, %scale), kwargs = {})\n"
            "    %add : [#users=3] = call_function[target=add](args = (%mul, %mul), kwargs = {alpha: 2})\n"
            "    %max : [#users=2] = call_function[target=max.dim](args = (%add, 1), kwargs = {})\n"
            "    %getitem : [#users=1] = call_function[target=getitem](args = (%max, 0), kwargs = {})\n"
            "    %getitem_1 : [#users=0] = call_function[target=getitem](args = (%max, 1), kwargs = {})\n"
            "    %sym_size : [#users=1] = call_function[target=sym_size](args = (%add, 0), kwargs = {})\n"
            "    %view : [#users=1] = call_function[target=view](args = (%add, [%sym_size, -1]), kwargs = {})\n"
            "    %fc : [#users=1] = call_module[target=fc](args = (%view,), kwargs = {})\n"
            "    return (fc, getitem)\n");
  const fx::Node& fc = gm->graph().node("fc");
  EXPECT_EQ(fc.meta().shape(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(gm->graph().node("getitem_1").meta().dtype(), DType::Int64);
}

TEST(TraceTest, GraphModuleEqualsEagerExactlyAtAnotherBatchSize) {
  auto net = make_net();
  auto gm = fx::symbolic_trace(net, randn({2, 3, 8, 8}));
  const Tensor x = randn({5, 3, 8, 8});
  for (bool training : {true, false}) {
    net->train(training);
    gm->train(training);
    NoGradGuard no_grad;
    const TensorList want = net->call({x});
    const TensorList got = gm->call({x});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].sizes(), (std::vector<int64_t>{5, 10}));
    EXPECT_TRUE(same_values(got[0], want[0])) << "training=" << training;
    EXPECT_TRUE(same_values(got[1], want[1])) << "training=" << training;
  }
}

TEST(TraceTest, TracingSharesAttributesAndLeavesTheModuleUntouched) {
  auto net = make_net();
  const nn::StateDict before = net->state_dict();
  std::vector<Tensor> snapshot;
  for (const auto& [k, t] : before) snapshot.push_back(t.clone());
  auto gm = fx::symbolic_trace(net, randn({2, 3, 8, 8}));  // train mode: BN must not update
  size_t i = 0;
  for (const auto& [k, t] : net->state_dict()) EXPECT_TRUE(same_values(t, snapshot[i++])) << k;
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.impl()->keys().has(fx::kTraceKey));
  for (const Tensor& b : net->buffers()) EXPECT_FALSE(b.impl()->keys().has(fx::kTraceKey));
  EXPECT_TRUE(gm->get_attr("scale").is_same(net->scale));
  EXPECT_EQ(gm->get_submodule("conv1").get(), net->conv1.get());
  EXPECT_EQ(gm->state_dict().keys(), before.keys());
  EXPECT_EQ(gm->type_name(), "GraphModule");
}

TEST(TraceTest, LeafPredicateDecidesWhatIsRecordedAsCallModule) {
  auto net = make_net();
  fx::TraceOptions nothing_is_a_leaf;
  nothing_is_a_leaf.is_leaf = [](const nn::Module&, const std::string&) { return false; };
  auto gm = fx::symbolic_trace(net, randn({2, 3, 8, 8}), nothing_is_a_leaf);
  std::vector<std::string> targets;
  for (const fx::Node* n : gm->graph())
    if (n->op() != fx::NodeOp::Placeholder && n->op() != fx::NodeOp::Output) targets.push_back(n->target());
  EXPECT_THAT(targets, ::testing::IsSupersetOf({"conv1.weight", "conv2d", "bn1.running_mean", "batch_norm", "addmm", "t"}));
  for (const fx::Node* n : gm->graph()) EXPECT_NE(n->op(), fx::NodeOp::CallModule) << n->name();
  // bn1's num_batches_tracked.add_(1) runs under a NoGradGuard in BatchNorm's forward.
  EXPECT_NE(gm->graph().node("add_").meta().find("no_grad"), nullptr);
  // Traced in train mode, the graph keeps training-mode batch norm (is_training() was read
  // while tracing, as in torch.fx), which is what the eager model does in train mode.
  const Tensor x = randn({3, 3, 8, 8});
  NoGradGuard no_grad;
  EXPECT_TRUE(same_values(gm->call({x})[0], net->call({x})[0]));
}

TEST(TraceTest, AUserModuleCanBeALeaf) {
  struct Block : nn::Cloneable<Block> {
    std::shared_ptr<nn::Linear> lin = register_module("lin", nn::Linear({.in = 4, .out = 4}));
    Tensor forward(const Tensor& x) override { return F::relu((*lin)(x)) + x; }
  };
  struct Outer : nn::Cloneable<Outer> {
    std::shared_ptr<Block> block = register_module("block", std::make_shared<Block>());
    Tensor forward(const Tensor& x) override { return (*block)(x) * 2.0; }
  };
  auto outer = std::make_shared<Outer>();
  fx::TraceOptions opts;
  opts.is_leaf = [](const nn::Module& m, const std::string& path) {
    return path == "block" || fx::is_default_leaf(m, path);
  };
  auto gm = fx::symbolic_trace(outer, randn({3, 4}), opts);
  EXPECT_EQ(gm->graph().node("block").format(), "%block : [#users=1] = call_module[target=block](args = (%x,), kwargs = {})");
  EXPECT_EQ(gm->graph().node("block").meta().shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(gm->get_submodule("block")->type_name(), "Block");
  const Tensor x = randn({6, 4});
  EXPECT_TRUE(same_values((*gm)(x), (*outer)(x)));
}

TEST(TraceTest, MultipleInputsBecomePlaceholdersInOrder) {
  struct TwoIn : nn::Module {
    TensorList forward_list(const TensorList& in) override { return {in[0] - in[1], in[1].t()}; }
  };
  auto gm = fx::symbolic_trace(std::make_shared<TwoIn>(), TensorList{randn({2, 3}), randn({2, 3})});
  EXPECT_THAT(names_of(gm->graph().placeholders()), ElementsAre("x0", "x1"));
  const Tensor a = randn({2, 3}), b = randn({2, 3});
  const TensorList out = gm->call({a, b});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(same_values(out[0], a - b));
  EXPECT_TRUE(same_values(out[1], b.t()));
  fx::TraceOptions named;
  named.inputs = {{{2, 3}, DType::Float32}, {{2, 3}, DType::Float32}};
  named.input_names = {"lhs", "rhs"};
  gm = fx::symbolic_trace(std::make_shared<TwoIn>(), named);
  EXPECT_THAT(names_of(gm->graph().placeholders()), ElementsAre("lhs", "rhs"));
}

TEST(TraceTest, TensorsMadeWhileTracingBecomeConstantsOutsideStateDict) {
  auto m = lambda_module([](const Tensor& x) { return x + full({3}, 0.25); });
  auto gm = fx::symbolic_trace(m, randn({2, 3}));
  EXPECT_EQ(gm->graph().node("_tensor_constant0").format(), "%_tensor_constant0 : [#users=1] = get_attr[target=_tensor_constant0]");
  ASSERT_EQ(gm->constants().size(), 1u);
  EXPECT_TRUE(gm->state_dict().keys().empty());
  const Tensor x = randn({4, 3});
  EXPECT_TRUE(same_values((*gm)(x), x + 0.25));
}

TEST(TraceTest, InPlaceOpsMakeLaterUsesDependOnTheWrite) {
  auto m = lambda_module([](const Tensor& x) {
    Tensor y = x * 2.0;
    y.add_(1.0);
    return y.relu();
  });
  auto gm = fx::symbolic_trace(m, randn({4}));
  EXPECT_EQ(gm->graph().node("relu").format(), "%relu : [#users=1] = call_function[target=relu](args = (%add_,), kwargs = {})");
  EXPECT_EQ(gm->graph().eliminate_dead_code(), 0u);
  const Tensor x = from_vector<float>({-2, -0.25, 0, 3});
  EXPECT_EQ(to_vector<float>((*gm)(x)), (std::vector<float>{0, 0.5, 1, 7}));
}

TEST(TraceTest, SizeArithmeticStaysSymbolic) {
  auto m = lambda_module([](const Tensor& x) { return x.reshape({x.size(0) * 2, x.size(1) / 2 - 1 + 1}); });
  auto gm = fx::symbolic_trace(m, randn({3, 4}));
  std::vector<std::string> targets;
  for (const fx::Node* n : gm->graph()) targets.push_back(n->target());
  EXPECT_THAT(targets, ElementsAre("x", "sym_size", "sym_mul", "sym_size", "sym_div", "sym_sub", "sym_add", "reshape", "output"));
  const Tensor x = randn({5, 6});
  const Tensor y = (*gm)(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{10, 3}));
  EXPECT_TRUE(same_values(y, x.reshape({10, 3})));
}

TEST(TraceTest, RetracingAGraphModuleGivesTheSameGraph) {
  auto gm = fx::symbolic_trace(make_net(), randn({2, 3, 8, 8}));
  auto again = fx::symbolic_trace(gm, randn({4, 3, 8, 8}));
  EXPECT_EQ(again->graph().to_string(), gm->graph().to_string());
  EXPECT_EQ(again->state_dict().keys(), gm->state_dict().keys());
}

TEST(TraceTest, CodeInsideANoGradGuardRunsWithoutGradInTheGraph) {
  struct Stat : nn::Cloneable<Stat> {
    Tensor w = register_parameter("w", full({3}, 2.0));
    Tensor forward(const Tensor& x) override {
      Tensor frozen;
      {
        NoGradGuard no_grad;
        frozen = w * 3.0;
      }
      return x * frozen + x * w;
    }
  };
  auto m = std::make_shared<Stat>();
  auto gm = fx::symbolic_trace(m, randn({3}));
  EXPECT_NE(gm->graph().node("mul").meta().find("no_grad"), nullptr);
  EXPECT_EQ(gm->graph().node("mul_1").meta().find("no_grad"), nullptr);
  const Tensor x = from_vector<float>({1, 2, 3});
  (*m)(x).sum().backward();
  const std::vector<float> eager = to_vector<float>(m->w.grad());
  m->zero_grad();
  (*gm)(x).sum().backward();
  EXPECT_EQ(to_vector<float>(m->w.grad()), eager);
  EXPECT_EQ(eager, (std::vector<float>{1, 2, 3}));
}

TEST(TraceTest, ADataDependentLeafGetsItsSizesFromACopyRunOnZeros) {
  struct Gate : nn::Cloneable<Gate> {
    Tensor calls = register_buffer("calls", zeros({1}));
    Tensor forward(const Tensor& x) override {
      {
        NoGradGuard no_grad;
        calls.add_(1.0);
      }
      return x.sum().item<float>() > 0 ? x * 2.0 : x.narrow(1, 0, 1);
    }
  };
  struct Outer : nn::Cloneable<Outer> {
    std::shared_ptr<Gate> gate = register_module("gate", std::make_shared<Gate>());
    Tensor forward(const Tensor& x) override { return (*gate)(x).relu(); }
  };
  auto outer = std::make_shared<Outer>();
  fx::TraceOptions opts;
  opts.is_leaf = [](const nn::Module& m, const std::string&) { return m.type_name() == "Gate"; };
  auto gm = fx::symbolic_trace(outer, randn({2, 3}), opts);
  // Zeros take the `else` branch: the proxy after the leaf has 1 column.
  EXPECT_EQ(gm->graph().node("gate").meta().shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(to_vector<float>(outer->gate->calls), (std::vector<float>{0}));  // the copy ran, not the module
  const Tensor x = from_vector<float>({1, -2, 3, 4, 5, -6}, {2, 3});
  EXPECT_TRUE(same_values((*gm)(x), (x * 2.0).relu()));
  EXPECT_EQ(to_vector<float>(outer->gate->calls), (std::vector<float>{1}));
}

TEST(TraceErrorTest, ReadingATracedValueIsRefusedNamingTheOp) {
  auto m = lambda_module([](const Tensor& x) { return x.sum().item<float>() > 0 ? x : -x; });
  EXPECT_THAT(trace_error_of([&] { fx::symbolic_trace(m, randn({3})); }),
              HasSubstr("symbolic_trace: 'item' returns a Scalar computed from the values of a traced tensor, and traced "
                        "tensors have no values: data-dependent control flow"));
}

TEST(TraceErrorTest, BranchingOnATracedSizeIsRefused) {
  auto m = lambda_module([](const Tensor& x) { return x.size(0) > 2 ? x : -x; });
  EXPECT_THAT(trace_error_of([&] { fx::symbolic_trace(m, randn({3})); }),
              HasSubstr("symbolic_trace: converting a symbolic size to an integer: %sym_size is a traced size (3 in this "
                        "trace); the graph must work for any value of it"));
  auto narrow_by_size = lambda_module([](const Tensor& x) { return x.narrow(0, 0, x.size(0) - 1); });
  EXPECT_THAT(trace_error_of([&] { fx::symbolic_trace(narrow_by_size, randn({3})); }),
              HasSubstr("%sym_sub is a traced size (2 in this trace)"));
}

TEST(TraceErrorTest, WritingIntoATensorMadeWhileTracingIsRefused) {
  auto m = lambda_module([](const Tensor& x) {
    Tensor acc = zeros({3});
    acc.add_(x);
    return acc;
  });
  EXPECT_THAT(trace_error_of([&] { fx::symbolic_trace(m, randn({3})); }),
              HasSubstr("'add_' writes into a tensor created while tracing"));
}

TEST(TraceErrorTest, MisuseIsExplained) {
  auto m = lambda_module([](const Tensor& x) { return x; });
  EXPECT_THAT(error_of([&] { fx::symbolic_trace(m, fx::TraceOptions{}); }),
              HasSubstr("symbolic_trace: TraceOptions::inputs is empty"));
  Tensor kept;
  auto keeper = lambda_module([&kept](const Tensor& x) {
    kept = x;
    return x;
  });
  fx::symbolic_trace(keeper, randn({2}));
  EXPECT_TRUE(fx::is_proxy(kept));
  EXPECT_THAT(error_of([&] { (void)(kept + 1.0); }), HasSubstr("a traced proxy has no values"));
  EXPECT_EQ(kept.size(0).hint(), 2);  // an inert proxy still reports its traced sizes
  auto nested = lambda_module([&](const Tensor& x) {
    fx::symbolic_trace(keeper, randn({2}));
    return x;
  });
  EXPECT_THAT(error_of([&] { fx::symbolic_trace(nested, randn({2})); }),
              HasSubstr("cannot start a trace inside the forward of a module being traced"));
}

// MobileNetV3's activations are leaves, like ReLU: a traced model keeps them as modules.
TEST(TraceTest, HardswishAndHardsigmoidModulesAreLeaves) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Hardswish>(), std::make_shared<nn::Hardsigmoid>());
  const Tensor x = randn({2, 5});
  auto gm = fx::symbolic_trace(seq, x);
  EXPECT_EQ(gm->graph().to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %_0 : [#users=1] = call_module[target=0](args = (%x,), kwargs = {})\n"
            "    %_1 : [#users=1] = call_module[target=1](args = (%_0,), kwargs = {})\n"
            "    return _1\n");
  EXPECT_EQ(to_vector<float>((*gm)(x)), to_vector<float>(hardsigmoid(hardswish(x))));
}
