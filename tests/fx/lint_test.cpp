// Graph::lint catches each broken invariant, and lists every problem in one error.
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using namespace fxtest;
using ::testing::HasSubstr;

namespace {

struct SmallGraph {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("relu", {x});
  Node* b = g.call_function("neg", {a});
  Node* out = g.output(b);
};

struct Owner : nn::Cloneable<Owner> {
  std::shared_ptr<nn::Linear> fc = register_module("fc", nn::Linear({.in = 2, .out = 2}));
  Tensor scale = register_parameter("scale", ones({1}));
  Tensor forward(const Tensor& x) override { return (*fc)(x) * scale; }
};

}  // namespace

TEST(LintTest, AWellFormedGraphPasses) {
  SmallGraph s;
  EXPECT_NO_THROW(s.g.lint());
}

TEST(LintTest, CatchesAUseBeforeTheDefinition) {
  SmallGraph s;
  s.g.move_before(s.b, s.a);
  EXPECT_EQ(error_of([&] { s.g.lint(); }),
            "Graph::lint: 1 problem: %neg uses %relu, which comes later in the graph (the order must be topological)");
}

TEST(LintTest, CatchesADanglingReferenceToAnotherGraph) {
  SmallGraph s;
  Graph other;
  Node* foreign = other.placeholder("y");
  s.b->set_args({foreign});
  EXPECT_THAT(error_of([&] { s.g.lint(); }),
              HasSubstr("%neg uses a node that is not in this graph (a dangling reference: erased, or from another graph)"));
  s.b->set_args({s.a});  // restores foreign's users before `other` dies
}

TEST(LintTest, CatchesDuplicateAndInvalidNames) {
  SmallGraph s;
  fx::detail::NodeTestAccess::set_name(*s.b, "relu");
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("two nodes are named 'relu'"));
  fx::detail::NodeTestAccess::set_name(*s.b, "not a name");
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("%not a name has a name that is not a valid identifier"));
  fx::detail::NodeTestAccess::set_name(*s.b, "neg");
}

TEST(LintTest, CatchesAMissingUser) {
  SmallGraph s;
  fx::detail::NodeTestAccess::users(*s.a).clear();
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("%neg uses %relu but is missing from the users of %relu"));
  fx::detail::NodeTestAccess::users(*s.a).push_back(s.b);
}

TEST(LintTest, CatchesAStaleOrRepeatedUser) {
  SmallGraph s;
  fx::detail::NodeTestAccess::users(*s.x).push_back(s.b);
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("%x lists %neg as a user, but %neg does not use it"));
  fx::detail::NodeTestAccess::users(*s.x).back() = s.a;
  EXPECT_THAT(error_of([&] { s.g.lint(); }), HasSubstr("%x lists the user %relu twice"));
  fx::detail::NodeTestAccess::users(*s.x).pop_back();
}

TEST(LintTest, CatchesUnknownFunctionTargets) {
  SmallGraph s;
  s.a->set_target("relu_with_a_typo");
  EXPECT_THAT(error_of([&] { s.g.lint(); }),
              HasSubstr("call_function %relu has target 'relu_with_a_typo', which is not a registered op"));
  s.a->set_target("getitem");  // an fx builtin is fine
  EXPECT_NO_THROW(s.g.lint());
}

TEST(LintTest, CatchesModuleAndAttributeTargetsTheOwnerLacks) {
  auto owner = std::make_shared<Owner>();
  Graph g;
  Node* x = g.placeholder("x");
  Node* fc = g.call_module("fc", {x});
  Node* w = g.get_attr("fc.weight");
  Node* s = g.get_attr("scale");
  Node* bad_m = g.call_module("fc2", {x});
  Node* bad_a = g.get_attr("fc.scale");
  g.output(NodeList{fc, w, s, bad_m, bad_a});
  EXPECT_NO_THROW(g.lint());  // without an owner, targets of modules and attributes are not checked
  const std::string msg = error_of([&] { g.lint(owner.get()); });
  EXPECT_THAT(msg, HasSubstr("Graph::lint: 2 problems: "));
  EXPECT_THAT(msg, HasSubstr("call_module %fc2 has target 'fc2', which is not a submodule of Owner"));
  EXPECT_THAT(msg, HasSubstr("get_attr %fc_scale has target 'fc.scale', which is not a parameter, buffer or constant of Owner"));
}

TEST(LintTest, CatchesOutputProblemsAndArgumentShapes) {
  SmallGraph s;
  s.g.output(s.a);  // a second output, appended after the first
  std::string msg = error_of([&] { s.g.lint(); });
  EXPECT_THAT(msg, HasSubstr("the output node %output is followed by %output_1; it must be last"));
  EXPECT_THAT(msg, HasSubstr("the graph has 2 output nodes; it must have at most one"));
  Graph g;
  Node* x = g.placeholder("x");
  g.create_node(NodeOp::GetAttr, "w", {x});
  g.create_node(NodeOp::CallMethod, "relu", {1});
  msg = error_of([&] { g.lint(); });
  EXPECT_THAT(msg, HasSubstr("get_attr %w must not have arguments"));
  EXPECT_THAT(msg, HasSubstr("call_method %relu needs the tensor `self` as its first argument"));
}
