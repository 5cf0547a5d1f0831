// Node::arg: a pass reads a call's argument by its schema name, whether the tracer recorded it
// by position or by keyword (Note [Arguments by name]).
#include "error_of.h"
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using qflow::testing_util::error_of;

namespace {

TEST(NodeArgTest, FindsPositionalAndKeywordArgumentsByName) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* add = g.call_function("add", {x, y}, {{"alpha", Argument(2.0)}});
  ASSERT_NE(add->arg("self"), nullptr);
  EXPECT_EQ(add->arg("self")->node(), x);
  EXPECT_EQ(add->arg("other")->node(), y);
  ASSERT_NE(add->arg("alpha"), nullptr);
  EXPECT_EQ(add->arg("alpha")->to_double(), 2.0);
  Node* positional = g.call_function("add", {x, y, 3.0});
  EXPECT_EQ(positional->arg("alpha")->to_double(), 3.0);
}

TEST(NodeArgTest, AnArgumentLeftToItsDefaultIsNull) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("add", {x, x});
  EXPECT_EQ(add->arg("alpha"), nullptr);
}

TEST(NodeArgTest, UnknownNamesAndNodesWithoutASchemaAreErrors) {
  Graph g;
  Node* x = g.placeholder("x");
  Node* add = g.call_function("add", {x, x});
  EXPECT_EQ(error_of([&] { add->arg("input"); }),
            "Node::arg: %add calls add, which has no argument named 'input'; its schema declares (self, other, alpha)");
  EXPECT_EQ(error_of([&] { x->arg("self"); }),
            "Node::arg: %x is a placeholder node; only calls of registered ops name their arguments");
}

}  // namespace
