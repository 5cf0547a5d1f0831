// Passes that erase nodes while they walk the graph (Note [Erasing during a walk]): erased
// nodes stay alive, marked erased, and every walk skips them. These tests also run under
// ASan in CI's run (qflow_sanitized_passes_tests), where touching a freed node fails.
#include "fx_test_util.h"

using namespace qflow;
using namespace qflow::fx;
using namespace fxtest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// x → a → b → c → d → output, a chain of element-wise ops.
struct Chain {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function("neg", {x});
  Node* b = g.call_function("exp", {a});
  Node* c = g.call_function("abs", {b});
  Node* d = g.call_function("sigmoid", {c});
  Node* out = g.output(d);

  // Erases `n` after its users read its input instead.
  void bypass(Node* n) {
    n->replace_all_uses_with(n->args()[0].node());
    g.erase_node(n);
  }
};

// The pass both walks run: at %neg it erases %exp, the node ahead of the walk; at %abs it
// erases the node it stands on. Returns the nodes it visited.
template <class Walk>
std::vector<std::string> erasing_pass(Chain& s, Walk&& walk) {
  std::vector<std::string> visited;
  for (Node* n : walk()) {
    visited.push_back(n->name());  // a freed node would be read here
    if (n == s.a) s.bypass(s.b);
    if (n == s.c) s.bypass(s.c);
  }
  return visited;
}

void expect_erased_pass_result(Chain& s) {
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "neg", "sigmoid", "output"));
  EXPECT_EQ(s.g.size(), 4u);
  EXPECT_TRUE(s.b->erased());
  EXPECT_TRUE(s.c->erased());
  EXPECT_FALSE(s.a->erased());
  EXPECT_THAT(names_of(s.a->users()), ElementsAre("sigmoid"));
  EXPECT_THAT(names_of(s.d->all_input_nodes()), ElementsAre("neg"));
  // Erased nodes are alive (ASan would report reading them) and out of every view of the graph.
  EXPECT_EQ(s.b->name(), "exp");
  EXPECT_TRUE(s.b->users().empty() && s.b->all_input_nodes().empty());
  EXPECT_EQ(s.g.find_node("exp"), nullptr);
  EXPECT_NO_THROW(s.g.lint());
  EXPECT_THAT(s.g.to_string(), Not(HasSubstr("%exp")));
  EXPECT_THAT(s.g.to_string(), Not(HasSubstr("%abs")));
  EXPECT_THAT(s.g.print_tabular(), Not(HasSubstr("exp")));
  std::unordered_map<const Node*, Node*> map;
  EXPECT_THAT(names_of(*s.g.clone(&map)), ElementsAre("x", "neg", "sigmoid", "output"));
  EXPECT_EQ(map.count(s.b), 0u);
}

}  // namespace

TEST(EraseDuringWalkTest, ASnapshotWalkSkipsNodesErasedAheadAndGoesOnFromTheErasedOne) {
  Chain s;
  const std::vector<std::string> visited = erasing_pass(s, [&] { return s.g.nodes(); });
  EXPECT_THAT(visited, ElementsAre("x", "neg", "abs", "sigmoid", "output"));  // %exp was erased ahead
  expect_erased_pass_result(s);
}

TEST(EraseDuringWalkTest, AnIteratorWalkSkipsNodesErasedAheadAndGoesOnFromTheErasedOne) {
  Chain s;
  const std::vector<std::string> visited = erasing_pass(s, [&]() -> const Graph& { return s.g; });
  EXPECT_THAT(visited, ElementsAre("x", "neg", "abs", "sigmoid", "output"));
  expect_erased_pass_result(s);
}

TEST(EraseDuringWalkTest, ErasingTheCurrentNodeAndTheNextOnesContinuesAtTheFirstLiveNode) {
  // At %neg the pass erases %neg itself, then %exp and %abs: the walk's next stop is %sigmoid,
  // reached through the links the erased nodes kept.
  for (bool snapshot : {false, true}) {
    Chain s;
    std::vector<std::string> visited;
    auto body = [&](Node* n) {
      visited.push_back(n->name());
      if (n != s.a) return;
      s.bypass(s.a);
      s.bypass(s.b);
      s.bypass(s.c);
    };
    if (snapshot) {
      for (Node* n : s.g.nodes()) body(n);
    } else {
      for (Node* n : s.g) body(n);
    }
    EXPECT_THAT(visited, ElementsAre("x", "neg", "sigmoid", "output")) << "snapshot: " << snapshot;
    EXPECT_THAT(names_of(s.g), ElementsAre("x", "sigmoid", "output"));
    EXPECT_NO_THROW(s.g.lint());
  }
}

TEST(EraseDuringWalkTest, AnIteratorWalkVisitsNodesInsertedAheadOfIt) {
  Chain s;
  std::vector<std::string> visited;
  for (Node* n : s.g) {
    visited.push_back(n->name());
    if (n != s.c) continue;
    // %abs becomes relu(%exp): a new node right where %abs was, then %abs goes.
    Node* relu = nullptr;
    {
      auto guard = s.g.inserting_after(n);
      relu = s.g.call_function("relu", {s.b});
    }
    s.c->replace_all_uses_with(relu);
    s.g.erase_node(s.c);
  }
  EXPECT_THAT(visited, ElementsAre("x", "neg", "exp", "abs", "relu", "sigmoid", "output"));
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "neg", "exp", "relu", "sigmoid", "output"));
  EXPECT_NO_THROW(s.g.lint());
}

TEST(EraseDuringWalkTest, ASnapshotSkipsErasedNodesWhenReadAfterwards) {
  Chain s;
  const Graph::Snapshot before = s.g.nodes();
  s.bypass(s.b);
  s.bypass(s.c);
  EXPECT_THAT(names_of(before.live()), ElementsAre("x", "neg", "sigmoid", "output"));
  // Nodes created after the snapshot are not in it.
  s.g.call_function("relu", {s.d});
  EXPECT_THAT(names_of(before.live()), ElementsAre("x", "neg", "sigmoid", "output"));
}

TEST(EraseDuringWalkTest, AnErasedNodeIsInertAndNamesItselfWhenUsed) {
  Chain s;
  s.bypass(s.b);
  EXPECT_THAT(error_of([&] { s.g.erase_node(s.b); }),
              HasSubstr("Graph::erase_node: %exp was erased from its graph (Graph::erase_node); it can no longer be used"));
  EXPECT_THAT(error_of([&] { s.g.call_function("relu", {s.b}); }),
              HasSubstr("fx: node %relu got the erased node %exp as an argument"));
  EXPECT_THAT(error_of([&] { s.c->set_args({s.b}); }), HasSubstr("got the erased node %exp as an argument"));
  EXPECT_THAT(error_of([&] { s.b->set_args({s.a}); }), HasSubstr("Node::set_args: %exp was erased"));
  EXPECT_THAT(error_of([&] { s.a->replace_all_uses_with(s.b); }), HasSubstr("%exp was erased"));
  EXPECT_THAT(error_of([&] { (void)s.g.inserting_before(s.b); }), HasSubstr("Graph::inserting_before: %exp was erased"));
  EXPECT_THAT(error_of([&] { s.g.move_after(s.b, s.d); }), HasSubstr("Graph::move_after: %exp was erased"));
  EXPECT_THAT(error_of([&] { s.g.rename(s.b, "gone"); }), HasSubstr("Graph::rename: %exp was erased"));
  // The refused calls left the graph as it was; the name is free again.
  EXPECT_THAT(names_of(s.g), ElementsAre("x", "neg", "abs", "sigmoid", "output"));
  EXPECT_NO_THROW(s.g.lint());
  EXPECT_EQ(s.g.call_function("exp", {s.a})->name(), "exp");
  // Its neighbours are the live nodes around where it stood.
  EXPECT_EQ(s.b->next(), s.c);
  EXPECT_EQ(s.b->prev(), s.a);
  EXPECT_EQ(s.a->next(), s.c);
}

TEST(EraseDuringWalkTest, IteratorsStepBothWaysOverLiveNodes) {
  Chain s;
  s.bypass(s.b);
  auto it = s.g.end();
  EXPECT_EQ(*--it, s.out);
  EXPECT_EQ(*--it, s.d);
  EXPECT_EQ(*--it, s.c);
  EXPECT_EQ(*--it, s.a);  // %exp is gone
  EXPECT_EQ(*++it, s.c);
  EXPECT_EQ(s.g.output_node(), s.out);
  s.bypass(s.d);
  EXPECT_EQ(std::distance(s.g.begin(), s.g.end()), 4);
  EXPECT_EQ(s.g.size(), 4u);
}
