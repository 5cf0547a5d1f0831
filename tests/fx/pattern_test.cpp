// Chain patterns: matching by data flow (single users, first arguments, any node order) and
// replacing a chain by one module (users rewired, old nodes and submodules gone, lint clean).
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace F = qflow::nn::functional;

namespace {

// conv → bn → relu → (view) → fc, plus a second conv whose output is read twice.
struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({.in = 2, .out = 3, .kernel = 3, .padding = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module("bn1", nn::BatchNorm2d({.features = 3}));
  std::shared_ptr<nn::Conv2d> conv2 = register_module("conv2", nn::Conv2d({.in = 3, .out = 3, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> bn2 = register_module("bn2", nn::BatchNorm2d({.features = 3}));
  Tensor forward(const Tensor& x) override {
    Tensor y = F::relu((*bn1)((*conv1)(x)));
    Tensor z = (*conv2)(y);
    return (*bn2)(z) + z;  // conv2 has two users: bn2 and add
  }
};

// Modules at the paths that hand-built graphs target.
struct Owner : nn::Cloneable<Owner> {
  std::shared_ptr<nn::Conv2d> ca = register_module("ca", nn::Conv2d({.in = 1, .out = 1, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> ba = register_module("ba", nn::BatchNorm2d({.features = 1}));
  std::shared_ptr<nn::Conv2d> cb = register_module("cb", nn::Conv2d({.in = 1, .out = 1, .kernel = 1}));
  std::shared_ptr<nn::BatchNorm2d> bb = register_module("bb", nn::BatchNorm2d({.features = 1}));
  Tensor forward(const Tensor& x) override { return x; }
};

Pattern conv_bn() { return {module_type<nn::Conv2d>(), module_type<nn::BatchNorm2d>()}; }
Pattern conv_bn_relu() {
  return {module_type<nn::Conv2d>(), module_named("BatchNorm2d"), any_of({module_type<nn::ReLU>(), function({"relu", "relu_"})})};
}

std::vector<std::vector<std::string>> names_of(const std::vector<Match>& matches) {
  std::vector<std::vector<std::string>> out;
  for (const Match& m : matches) out.push_back(fxtest::names_of(m.nodes));
  return out;
}

std::shared_ptr<GraphModule> traced_net(std::shared_ptr<Net>* keep = nullptr) {
  manual_seed(4);
  auto net = std::make_shared<Net>();
  net->eval();
  if (keep) *keep = net;
  return symbolic_trace(net, randn({1, 2, 4, 4}));
}

}  // namespace

TEST(PatternTest, DescribesItself) {
  EXPECT_EQ(describe(conv_bn_relu()), "Conv2d -> BatchNorm2d -> (ReLU | relu | relu_)");
  EXPECT_EQ(fx::detail::short_type_name(typeid(nn::BatchNorm2d)), "BatchNorm2d");
}

TEST(PatternTest, FindsChainsByDataFlowAndRespectsTheSingleUserRule) {
  auto gm = traced_net();
  EXPECT_THAT(names_of(match_chains(*gm, conv_bn_relu())), ElementsAre(ElementsAre("conv1", "bn1", "relu")));
  // conv2 feeds bn2 and the add: folding it away would change the add, so it is no match.
  EXPECT_THAT(names_of(match_chains(*gm, conv_bn())), ElementsAre(ElementsAre("conv1", "bn1")));
  EXPECT_TRUE(match_chain_at(*gm, gm->graph().node("conv2"), conv_bn()).nodes.empty());
  // Only inner nodes need a single user: the last one (conv2, read by bn2 and add) may have several.
  EXPECT_THAT(names_of(match_chains(*gm, {function({"relu"}), module_type<nn::Conv2d>()})),
              ElementsAre(ElementsAre("relu", "conv2")));
}

TEST(PatternTest, TheChainFollowsTheFirstArgumentOnly) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("relu", {x});
  Node* b = g.call_function("add", {x, a});  // a is a side operand of add
  g.output(b);
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  EXPECT_TRUE(match_chains(*gm, {function({"relu"}), function({"add"})}).empty());
  gm->graph().node("add").set_args({&gm->graph().node("relu"), &gm->graph().node("x")});
  EXPECT_EQ(match_chains(*gm, {function({"relu"}), function({"add"})}).size(), 1u);
}

TEST(PatternTest, MatchingIsIndependentOfNodeOrder) {
  // Two conv → bn chains, interleaved in the node list: ca, cb, bb, ba.
  Graph g;
  Node* x = g.placeholder("x");
  Node* ca = g.call_module("ca", {x});
  Node* cb = g.call_module("cb", {x});
  Node* bb = g.call_module("bb", {cb});
  Node* ba = g.call_module("ba", {ca});
  g.output(g.call_function("add", {ba, bb}));
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  EXPECT_THAT(names_of(match_chains(*gm, conv_bn())), ElementsAre(ElementsAre("ca", "ba"), ElementsAre("cb", "bb")));
  // Another topological order of the same program gives the same chains (in the new order).
  Graph& h = gm->graph();
  h.move_before(&h.node("cb"), &h.node("ca"));
  h.move_before(&h.node("bb"), &h.node("ca"));
  EXPECT_THAT(fxtest::names_of(h), ElementsAre("x", "cb", "bb", "ca", "ba", "add", "output"));
  EXPECT_NO_THROW(h.lint());
  EXPECT_THAT(names_of(match_chains(*gm, conv_bn())), ElementsAre(ElementsAre("cb", "bb"), ElementsAre("ca", "ba")));
}

TEST(PatternTest, MatchesNeverShareANode) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r1 = g.call_function("relu", {x});
  Node* r2 = g.call_function("relu", {r1});
  Node* r3 = g.call_function("relu", {r2});
  Node* r4 = g.call_function("relu", {r3});
  g.output(r4);
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  EXPECT_THAT(names_of(match_chains(*gm, {function({"relu"}), function({"relu"})})),
              ElementsAre(ElementsAre("relu", "relu_1"), ElementsAre("relu_2", "relu_3")));
}

TEST(PatternTest, ModuleTypeIsExactAndNeedsACallModule) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* w = g.get_attr("ca.weight");
  g.output(g.call_function("conv2d", {x, w}));
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  const NodePattern conv = module_type<nn::Conv2d>();
  for (const Node* n : gm->graph()) EXPECT_FALSE(conv.matches(*n, *gm)) << n->name();
  EXPECT_FALSE(module_type<nn::BatchNorm1d>().matches(gm->graph().node("conv2d"), *gm));
  EXPECT_TRUE(function({"conv2d"}).matches(gm->graph().node("conv2d"), *gm));
}

TEST(ReplaceChainTest, RewiresUsersErasesNodesAndDeletesUnusedSubmodules) {
  std::shared_ptr<Net> net;
  auto gm = traced_net(&net);
  const Tensor x = randn({2, 2, 4, 4});
  NoGradGuard no_grad;
  const Tensor want = (*net)(x);
  const std::vector<Match> matches = match_chains(*gm, conv_bn_relu());
  ASSERT_EQ(matches.size(), 1u);
  // The replacement computes the same thing with copies of the chain's modules.
  auto fused = std::make_shared<nn::Sequential>(net->conv1->clone(), net->bn1->clone(), std::make_shared<nn::ReLU>());
  fused->eval();
  Node* node = replace_chain(*gm, matches[0], fused);
  EXPECT_EQ(node->name(), "conv1");
  EXPECT_EQ(node->target(), "conv1");
  EXPECT_EQ(gm->get_submodule("conv1").get(), fused.get());
  EXPECT_THAT(fxtest::names_of(gm->graph()), ElementsAre("x", "conv1", "conv2", "bn2", "add", "output"));
  EXPECT_THAT(fxtest::names_of(node->users()), ElementsAre("conv2"));
  EXPECT_THAT(fxtest::names_of(node->all_input_nodes()), ElementsAre("x"));
  EXPECT_EQ(gm->graph().node("conv2").args()[0].node(), node);
  EXPECT_EQ(node->meta().shape(), (std::vector<int64_t>{1, 3, 4, 4}));
  EXPECT_FALSE(error_of([&] { gm->get_submodule("bn1"); }).empty());
  EXPECT_NO_THROW(gm->recompile());
  const auto keys = gm->state_dict().keys();
  EXPECT_EQ(keys.front(), "conv1.0.weight");  // the Sequential took conv1's place, first in order
  EXPECT_EQ(std::count_if(keys.begin(), keys.end(), [](const std::string& k) { return k.rfind("bn1.", 0) == 0; }), 0);
  EXPECT_TRUE(same_values((*gm)(x), want));
}

TEST(ReplaceChainTest, AModuleCalledElsewhereStaysAndTheReplacementGoesBesideIt) {
  // ca is called twice; the chain ca → ba must not change the other call.
  Graph g;
  Node* x = g.placeholder("x");
  Node* c1 = g.call_module("ca", {x});
  Node* b1 = g.call_module("ba", {c1});
  Node* c2 = g.call_module("ca", {b1});
  g.output(c2);
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  auto chains = match_chains(*gm, conv_bn());
  ASSERT_EQ(chains.size(), 1u);
  Node* fused = replace_chain(*gm, chains[0], std::make_shared<nn::Identity>());
  EXPECT_EQ(fused->target(), "ca_fused");
  EXPECT_EQ(fused->name(), "ca");
  EXPECT_EQ(gm->graph().node("ca_1").target(), "ca");
  EXPECT_EQ(gm->get_submodule("ca")->type_name(), "Conv2d");
  EXPECT_FALSE(error_of([&] { gm->get_submodule("ba"); }).empty());
  EXPECT_NO_THROW(gm->recompile());
}

TEST(ReplaceChainTest, EmptiedContainersGoAway) {
  struct Inner : nn::Cloneable<Inner> {
    std::shared_ptr<nn::Sequential> seq =
        register_module("seq", std::make_shared<nn::Sequential>(nn::Conv2d({.in = 1, .out = 1, .kernel = 1}), nn::BatchNorm2d({.features = 1})));
    Tensor forward(const Tensor& x) override { return (*seq)(x); }
  };
  struct Outer : nn::Cloneable<Outer> {
    std::shared_ptr<Inner> block = register_module("block", std::make_shared<Inner>());
    std::shared_ptr<nn::ReLU> act = register_module("act", std::make_shared<nn::ReLU>());
    Tensor forward(const Tensor& x) override { return (*act)((*block)(x)); }
  };
  auto gm = symbolic_trace(std::make_shared<Outer>(), randn({1, 1, 2, 2}));
  auto chains = match_chains(*gm, conv_bn());
  ASSERT_EQ(chains.size(), 1u);
  replace_chain(*gm, chains[0], std::make_shared<nn::Identity>(), "fused");
  EXPECT_FALSE(error_of([&] { gm->get_submodule("block"); }).empty());  // block.seq.0 and .1 were all it held
  EXPECT_THAT(fxtest::names_of(gm->graph()), ElementsAre("x", "block_seq_0", "act", "output"));
  EXPECT_EQ(gm->graph().node("block_seq_0").target(), "fused");
  std::vector<std::string> paths;
  for (const auto& [path, m] : gm->named_modules()) paths.push_back(path);
  EXPECT_THAT(paths, ElementsAre("", "act", "fused"));
  EXPECT_NO_THROW(gm->recompile());
}

TEST(ReplaceChainTest, RefusesStaleMatchesAndPathsOthersUse) {
  auto gm = traced_net();
  Graph& g = gm->graph();
  // An inner node read outside the chain.
  Match shared{{&g.node("conv2"), &g.node("bn2")}};
  EXPECT_THAT(error_of([&] { replace_chain(*gm, shared, std::make_shared<nn::Identity>()); }),
              HasSubstr("fx::replace_chain: %conv2 is also used by %add outside the match, so it cannot be replaced"));
  // A path another node calls.
  Match chain = match_chains(*gm, conv_bn())[0];
  EXPECT_THAT(error_of([&] { replace_chain(*gm, chain, std::make_shared<nn::Identity>(), "conv2"); }),
              HasSubstr("fx::replace_chain: 'conv2' is used by nodes outside the match"));
  // A node that is gone.
  replace_chain(*gm, chain, std::make_shared<nn::Identity>());
  EXPECT_THAT(error_of([&] { replace_chain(*gm, chain, std::make_shared<nn::Identity>()); }),
              HasSubstr("of the match was erased (a stale match)"));
  EXPECT_THAT(error_of([&] { replace_chain(*gm, Match{}, std::make_shared<nn::Identity>()); }),
              HasSubstr("fx::replace_chain: the match is empty"));
  EXPECT_NO_THROW(gm->recompile());
}

TEST(ReplacePatternTest, ReplacesWhereTheRewriteGivesAModuleAndLints) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* ba = g.call_module("ba", {g.call_module("ca", {x})});
  Node* bb = g.call_module("bb", {g.call_module("cb", {x})});
  g.output(g.call_function("add", {ba, bb}));
  auto gm = std::make_shared<GraphModule>(*std::make_shared<Owner>(), g.clone());
  std::vector<std::string> seen;
  const size_t n = replace_pattern(*gm, conv_bn(), [&](GraphModule&, const Match& m) -> nn::ModulePtr {
    seen.push_back(m.first()->target());
    if (m.first()->target() == "cb") return nullptr;  // leave this one
    return std::make_shared<nn::Identity>();
  });
  EXPECT_EQ(n, 1u);
  EXPECT_THAT(seen, ElementsAre("ca", "cb"));
  EXPECT_THAT(fxtest::names_of(gm->graph()), ElementsAre("x", "ca", "cb", "bb", "add", "output"));
  EXPECT_EQ(gm->get_submodule("ca")->type_name(), "Identity");
  EXPECT_EQ(gm->get_submodule("bb")->type_name(), "BatchNorm2d");
  EXPECT_EQ(format_arguments(gm->graph().node("add").args()), "(%ca, %bb)");
  NoGradGuard no_grad;
  gm->eval();
  const Tensor in = randn({1, 1, 2, 2});
  EXPECT_TRUE(same_values((*gm)(in), in + (*gm->get_submodule("bb"))((*gm->get_submodule("cb"))(in))));
}
