// The Graph/Node IR: naming, users kept consistent by every mutation, insertion points,
// erasing, replacing, dead code elimination, copying and the text forms.
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

// x → conv1 → relu → add(relu, x) → output
struct SmallGraph {
  Graph g;
  Node* x = g.placeholder("x");
  Node* conv = g.call_module("conv1", {x});
  Node* relu = g.call_function("relu", {conv});
  Node* add = g.call_function("add", {relu, x});
  Node* out = g.output(add);
};

}  // namespace

TEST(GraphTest, NamesAreUniqueReadableIdentifiers) {
  Graph g;
  Node* x = g.placeholder("x");
  EXPECT_EQ(g.call_module("layer1.0.conv1", {x})->name(), "layer1_0_conv1");
  EXPECT_EQ(g.call_function("add", {x, x})->name(), "add");
  EXPECT_EQ(g.call_function("add", {x, x})->name(), "add_1");
  EXPECT_EQ(g.call_function("add.Scalar", {x, 2})->name(), "add_2");
  EXPECT_EQ(g.call_function("max.dim", {x, 1})->name(), "max");
  EXPECT_EQ(g.get_attr("features.0.weight")->name(), "features_0_weight");
  EXPECT_EQ(g.placeholder("x")->name(), "x_1");
  EXPECT_EQ(g.find_node("add_1")->target(), "add");
  EXPECT_EQ(g.find_node("nope"), nullptr);
  EXPECT_THAT(error_of([&] { g.node("nope"); }), HasSubstr("Graph: no node named 'nope'"));
}

TEST(GraphTest, UsersAreInsertionOrderedAndUnique) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* a = g.call_function("mul", {x, x});
  Node* b = g.call_function("add", {y, x});
  EXPECT_THAT(names_of(x->users()), ElementsAre("mul", "add"));
  EXPECT_THAT(names_of(y->users()), ElementsAre("add"));
  EXPECT_THAT(names_of(a->all_input_nodes()), ElementsAre("x"));
  EXPECT_THAT(names_of(b->all_input_nodes()), ElementsAre("y", "x"));
}

TEST(GraphTest, EveryArgumentMutationKeepsUsersConsistent) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* s = g.call_function("sym_size", {x, 0});
  Node* v = g.call_function("view", {x, IntListArg{s, -1}});
  EXPECT_THAT(names_of(s->users()), ElementsAre("view"));
  v->set_args({y, IntListArg{int64_t{4}, int64_t{-1}}});  // x and s are no longer read
  EXPECT_TRUE(x->users().size() == 1 && x->users()[0] == s);
  EXPECT_TRUE(s->users().empty());
  EXPECT_THAT(names_of(y->users()), ElementsAre("view"));
  v->set_kwarg("extra", s);
  EXPECT_THAT(names_of(s->users()), ElementsAre("view"));
  EXPECT_TRUE(v->erase_kwarg("extra"));
  EXPECT_TRUE(s->users().empty());
  v->set_arg(0, x);
  EXPECT_THAT(names_of(x->users()), ElementsAre("sym_size", "view"));
  EXPECT_TRUE(y->users().empty());
  Node* c = g.call_function("cat", {NodeList{x, y, x}});
  EXPECT_THAT(names_of(c->all_input_nodes()), ElementsAre("x", "y"));
  EXPECT_NO_THROW(g.lint());
}

TEST(GraphTest, ReplaceAllUsesWithMovesEveryUserOrTheFilteredOnes) {
  SmallGraph s;
  Node* y = s.g.placeholder("y");
  std::vector<Node*> changed = s.x->replace_all_uses_with(y, [](const Node& u) { return u.op() == NodeOp::CallModule; });
  EXPECT_THAT(names_of(changed), ElementsAre("conv1"));
  EXPECT_THAT(names_of(s.x->users()), ElementsAre("add"));
  EXPECT_THAT(names_of(y->users()), ElementsAre("conv1"));
  changed = s.g.replace_all_uses_with(s.x, y);
  EXPECT_THAT(names_of(changed), ElementsAre("add"));
  EXPECT_TRUE(s.x->users().empty());
  EXPECT_EQ(format_arguments(s.add->args()), "(%relu, %y)");
}

TEST(GraphTest, ReplaceInputWithChangesOneUser) {
  SmallGraph s;
  s.g.replace_input_with(s.add, s.relu, s.conv);
  EXPECT_EQ(format_arguments(s.add->args()), "(%conv1, %x)");
  EXPECT_TRUE(s.relu->users().empty());
  EXPECT_THAT(names_of(s.conv->users()), ElementsAre("relu", "add"));
}

TEST(GraphTest, EraseNodeRefusesANodeThatIsStillUsed) {
  SmallGraph s;
  EXPECT_EQ(error_of([&] { s.g.erase_node(s.x); }),
            "Graph::erase_node: cannot erase %x because it is still used by %conv1, %add (replace those uses first)");
  EXPECT_EQ(s.g.size(), 5u);
  s.add->replace_input_with(s.relu, s.conv);
  s.g.erase_node(s.relu);
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "conv1", "add", "output"));
  EXPECT_THAT(names_of(s.conv->users()), ElementsAre("add"));
  EXPECT_EQ(s.g.find_node("relu"), nullptr);
  EXPECT_NO_THROW(s.g.lint());
}

TEST(GraphTest, InsertionGuardsPlaceNodesAndRestoreThePreviousPoint) {
  SmallGraph s;
  {
    auto after = s.g.inserting_after(s.conv);
    s.g.call_function("neg", {s.conv});
    s.g.call_function("exp", {s.conv});  // in creation order, right after %conv1
    {
      auto before = s.g.inserting_before(s.x);
      s.g.placeholder("first");
    }
    s.g.call_function("abs", {s.conv});  // the outer guard is back in force
  }
  s.g.call_function("sigmoid", {s.add});  // default: before the output
  EXPECT_THAT(names_of(s.g), ElementsAre("first", "x", "conv1", "neg", "exp", "abs", "relu", "add", "sigmoid", "output"));
}

TEST(GraphTest, AnInsertionPointOnAnErasedNodeMovesToItsSuccessor) {
  SmallGraph s;
  s.add->replace_input_with(s.relu, s.conv);
  auto before = s.g.inserting_before(s.relu);
  s.g.erase_node(s.relu);
  s.g.call_function("neg", {s.conv});
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "conv1", "neg", "add", "output"));
}

TEST(GraphTest, MovingNodesKeepsThemAndLintChecksTheOrder) {
  SmallGraph s;
  s.g.move_after(s.relu, s.add);
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "conv1", "add", "relu", "output"));
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("%add uses %relu, which comes later in the graph"));
  s.g.move_before(s.relu, s.add);
  EXPECT_NO_THROW(s.g.lint());
}

TEST(GraphTest, DeadCodeEliminationRemovesUnusedPureNodesOnly) {
  SmallGraph s;
  Node* dead1 = s.g.call_function("neg", {s.conv});
  s.g.call_function("exp", {dead1});                        // dead chain: exp, then neg
  s.g.call_function("relu_", {s.relu});                     // in-place: kept
  Node* unused = s.g.placeholder("unused");                 // placeholders stay
  EXPECT_EQ(s.g.eliminate_dead_code(), 2u);
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "conv1", "relu", "add", "relu_", "unused", "output"));
  EXPECT_TRUE(unused->users().empty());
  // A custom purity rule: here nothing but the output is kept.
  s.g.output_node()->set_args({Argument()});
  EXPECT_EQ(s.g.eliminate_dead_code([](const Node& n) { return n.op() == NodeOp::Output; }), 6u);
  EXPECT_THAT(names_of(s.g), ElementsAre("output"));
}

TEST(GraphTest, TextFormFollowsTorchFx) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* conv = g.call_module("conv1", {x});
  Node* scale = g.get_attr("scale");
  Node* mul = g.call_function("mul", {conv, scale});
  Node* add = g.call_function("add", {mul, mul}, {{"alpha", 2}});
  Node* size = g.call_function("sym_size", {add, 0});
  Node* view = g.call_function("view", {add, IntListArg{size, int64_t{-1}}});
  Node* m = g.call_function("max.dim", {add, 1});
  Node* values = g.call_function("getitem", {m, 0});
  Node* pow = g.call_function("pow.Tensor_Scalar", {values, 0.5});
  g.output(NodeList{view, pow});
  EXPECT_EQ(g.to_string(),
            "graph():\n"
            "    %x : [#users=1] = placeholder[target=x]\n"
            "    %conv1 : [#users=1] = call_module[target=conv1](args = (%x,), kwargs = {})\n"
            "    %scale : [#users=1] = get_attr[target=scale]\n"
            "    %mul : [#users=1] = call_function[target=mul](args = (%conv1, %scale), kwargs = {})\n"
            "    %add : [#users=3] = call_function[target=add](args = (%mul, %mul), kwargs = {alpha: 2})\n"
            "    %sym_size : [#users=1] = call_function[target=sym_size](args = (%add, 0), kwargs = {})\n"
            "    %view : [#users=1] = call_function[target=view](args = (%add, [%sym_size, -1]), kwargs = {})\n"
            "    %max : [#users=1] = call_function[target=max.dim](args = (%add, 1), kwargs = {})\n"
            "    %getitem : [#users=1] = call_function[target=getitem](args = (%max, 0), kwargs = {})\n"
            "    %pow : [#users=1] = call_function[target=pow.Tensor_Scalar](args = (%getitem, 0.5), kwargs = {})\n"
            "    return (view, pow)\n");
  EXPECT_EQ(format_argument(Argument(2.0)), "2.0");
  EXPECT_EQ(format_argument(Argument(1e-5)), "1e-05");
  EXPECT_EQ(format_argument(Argument(true)), "True");
  EXPECT_EQ(format_argument(Argument()), "None");
  EXPECT_EQ(format_argument(Argument("same")), "'same'");
  EXPECT_EQ(format_argument(Argument(DType::Float64)), "float64");
}

TEST(GraphTest, PrintTabularListsEveryNode) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function("relu", {x});
  g.output(r);
  EXPECT_EQ(g.print_tabular(),
            "opcode         name    target  args      kwargs\n"
            "-------------  ------  ------  --------  ------\n"
            "placeholder    x       x       ()        {}\n"
            "call_function  relu    relu    (%x,)     {}\n"
            "output         output  output  (%relu,)  {}\n");
}

TEST(GraphTest, CloneIsADeepIndependentCopy) {
  SmallGraph s;
  s.relu->meta().set("quant.bits", 8.0);
  std::unordered_map<const Node*, Node*> map;
  std::unique_ptr<Graph> copy = s.g.clone(&map);
  EXPECT_EQ(copy->to_string(), s.g.to_string());
  EXPECT_EQ(map.at(s.relu)->name(), "relu");
  EXPECT_NE(map.at(s.relu), s.relu);
  EXPECT_EQ(std::get<double>(*map.at(s.relu)->meta().find("quant.bits")), 8.0);
  EXPECT_THAT(names_of(map.at(s.x)->users()), ElementsAre("conv1", "add"));
  s.add->replace_input_with(s.x, s.relu);
  EXPECT_EQ(format_arguments(map.at(s.add)->args()), "(%relu, %x)");
  EXPECT_NO_THROW(copy->lint());
  // Names made after cloning continue the counters.
  EXPECT_EQ(copy->call_function("relu", {map.at(s.x)})->name(), "relu_1");
}

TEST(GraphTest, RenameKeepsNamesUniqueIdentifiers) {
  SmallGraph s;
  s.g.rename(s.relu, "activation");
  EXPECT_EQ(s.g.find_node("activation"), s.relu);
  EXPECT_EQ(s.g.find_node("relu"), nullptr);
  EXPECT_THAT(error_of([&] { s.g.rename(s.relu, "conv1"); }), HasSubstr("cannot rename %activation to 'conv1': the name is taken"));
  EXPECT_THAT(error_of([&] { s.g.rename(s.relu, "1x"); }), HasSubstr("'1x' is not a valid node name"));
}

TEST(GraphTest, NodeCopyMapsArgumentsIntoAnotherGraph) {
  SmallGraph s;
  Graph other;
  Node* y = other.placeholder("y");
  Node* c = other.node_copy(*s.conv, [&](Node*) { return y; });
  EXPECT_EQ(c->format(), "%conv1 : [#users=0] = call_module[target=conv1](args = (%y,), kwargs = {})");
  EXPECT_THAT(names_of(y->users()), ElementsAre("conv1"));
}
