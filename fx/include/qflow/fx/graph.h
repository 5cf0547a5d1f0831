#pragma once
// Graph: an ordered list of Nodes that owns them (torch.fx's Graph, in C++).
//
//   fx::Graph g;
//   Node* x = g.placeholder("x");
//   Node* c = g.call_module("conv1", {x});
//   Node* r = g.call_function("relu", {c});
//   g.output(r);
//   {
//     auto guard = g.inserting_after(c);           // new nodes go right after %conv1
//     Node* s = g.call_function("mul.Scalar", {c, 2.0});
//     r->replace_input_with(c, s);
//   }
//   g.lint();
//   std::cout << g.to_string();
//
// The graph owns its nodes for its whole life: a Node* stays valid until the graph dies,
// whatever is inserted, moved or erased around it. An erased node leaves the node list but
// stays alive, marked Node::erased(), and every walk skips it (Note [Erasing during a walk]).
// Without an insertion guard, new nodes go before the output node when there is one and at
// the end otherwise.
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qflow/fx/node.h"

namespace qflow::nn {
class Module;
}

namespace qflow::fx {

class Graph;

/// Restores the previous insertion point when it goes out of scope (see Graph::inserting_before).
/// Guards nest and must die in reverse order of creation (keep them scoped).
class [[nodiscard]] InsertGuard {
 public:
  ~InsertGuard();
  InsertGuard(const InsertGuard&) = delete;
  InsertGuard& operator=(const InsertGuard&) = delete;

 private:
  friend class Graph;
  explicit InsertGuard(Graph& graph) : graph_(graph) {}
  Graph& graph_;
};

// Note [Erasing during a walk]
// Passes walk the graph and erase nodes as they go: the node they stand on (a ReLU folded into
// its producer), or one ahead of it (the add a convolution absorbs as a post-op). When erasing
// freed the node, a walk over a snapshot later read freed memory (a heap-use-after-free in
// fuse_integer_layers and in the ONNX exporter's inlining), and a walk with begin()/end() lost
// its place. So, as in torch.fx (Node._erased):
//   - erase_node unlinks the node from the list but does not destroy it: the graph keeps it
//     until the graph itself dies, and marks it erased (Node::erased()). A Node* never dangles
//     while its graph lives.
//   - Every walk the graph offers skips erased nodes. nodes() is a snapshot taken when the walk
//     begins; it skips the nodes erased since (so nodes erased ahead of the walk are not
//     visited). begin()/end() walk the live list; an erased node keeps its link to the node
//     that followed it, so erasing the node the walk stands on, or any other, is safe, and
//     ++ goes on to the next live node (-- from an erased node: to the live node that preceded
//     it, or end() when none did).
//   - An erased node is inert: it keeps its arguments (for messages) but reads nothing (no
//     inputs, no users), its name is free again, lint(), clone(), printing and the
//     interpreter never see it, and using it (as an argument, anchor, or target of a
//     mutation) throws qflow::Error naming it.
// What a walk sees of nodes inserted or moved while it runs: begin()/end() visits a node
// inserted after its position and skips one inserted before it, like std::list; nodes()
// visits only the snapshot. Holding a Node* across a pass that may erase it is safe but
// stale: check erased() before acting on it.
// Erased nodes are kept, not recycled, so a pass erasing in a loop grows the graph's memory by
// one Node per erasure until the graph dies; graphs hold a few hundred nodes at most, and
// clone() copies only the live nodes.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- iteration (in order, live nodes only; erasing any node while walking is safe, see
  // Note [Erasing during a walk]) -----------------------------------------------------------
  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node* const*;
    using reference = Node*;
    iterator() = default;
    iterator(const Graph* graph, Node* node) : graph_(graph), node_(node) {}
    Node* operator*() const { return node_; }
    /// To the next live node: from an erased node, the one that followed it (or its follower).
    iterator& operator++();
    iterator operator++(int) { iterator old = *this; ++*this; return old; }
    /// To the previous live node (end() steps back to the last node).
    iterator& operator--();
    iterator operator--(int) { iterator old = *this; --*this; return old; }
    bool operator==(const iterator& o) const { return node_ == o.node_; }

   private:
    const Graph* graph_ = nullptr;
    Node* node_ = nullptr;  // null: end()
  };
  iterator begin() const { return iterator(this, head_); }
  iterator end() const { return iterator(this, nullptr); }
  /// The number of live nodes.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// The nodes in order as they are when nodes() is called; a walk over it skips each node
  /// erased since (Note [Erasing during a walk]). Safe to walk while mutating the graph.
  class Snapshot {
   public:
    class iterator {
     public:
      using iterator_category = std::forward_iterator_tag;
      using value_type = Node*;
      using difference_type = std::ptrdiff_t;
      using pointer = Node* const*;
      using reference = Node*;
      iterator() = default;
      iterator(std::vector<Node*>::const_iterator it, std::vector<Node*>::const_iterator end) : it_(it), end_(end) {
        skip_erased();
      }
      Node* operator*() const { return *it_; }
      iterator& operator++() { ++it_; skip_erased(); return *this; }
      iterator operator++(int) { iterator old = *this; ++*this; return old; }
      bool operator==(const iterator& o) const { return it_ == o.it_; }

     private:
      void skip_erased();
      std::vector<Node*>::const_iterator it_, end_;
    };
    explicit Snapshot(std::vector<Node*> nodes) : nodes_(std::move(nodes)) {}
    iterator begin() const { return iterator(nodes_.begin(), nodes_.end()); }
    iterator end() const { return iterator(nodes_.end(), nodes_.end()); }
    /// The snapshot's nodes not erased since it was taken, in order.
    std::vector<Node*> live() const { return {begin(), end()}; }

   private:
    std::vector<Node*> nodes_;
  };
  Snapshot nodes() const;
  /// Null when no node has that name.
  Node* find_node(std::string_view name) const;
  /// Throws qflow::Error naming the missing node when absent.
  Node& node(std::string_view name) const;
  /// The output node, or null when the graph has none yet.
  Node* output_node() const;
  std::vector<Node*> placeholders() const;

  // ---- creation ---------------------------------------------------------------------------
  /// Creates a node at the insertion point. Its name is `name_hint` made unique and a valid
  /// identifier (dots become underscores, "add" → "add_1" when taken); an empty hint uses
  /// the target.
  Node* create_node(NodeOp op, std::string target, Arguments args = {}, Kwargs kwargs = {},
                    std::string_view name_hint = {});
  Node* placeholder(std::string name);
  Node* get_attr(std::string path);
  Node* call_function(std::string op, Arguments args, Kwargs kwargs = {});
  Node* call_module(std::string path, Arguments args, Kwargs kwargs = {});
  Node* call_method(std::string method, Arguments args, Kwargs kwargs = {});
  /// The graph's result: one node, a NodeList for several outputs, or None.
  Node* output(Argument result);
  /// Copies `source` (from any graph) into this one at the insertion point, with every node
  /// it references mapped through `map`; keeps its op, target and meta, and its name when free.
  Node* node_copy(const Node& source, const std::function<Node*(Node*)>& map);

  /// New nodes go right before `n` until the guard dies.
  InsertGuard inserting_before(Node* n);
  /// New nodes go right after `n` (in creation order) until the guard dies.
  InsertGuard inserting_after(Node* n);
  /// Moves `n` right before / after `anchor` (lint() checks the order stays topological).
  void move_before(Node* n, Node* anchor);
  void move_after(Node* n, Node* anchor);

  // ---- rewriting --------------------------------------------------------------------------
  /// Erases an unused node: unlinks it from the graph and marks it erased; the graph keeps
  /// it alive (Note [Erasing during a walk]). Throws qflow::Error naming the node and its
  /// users when it still has any (replace those uses first), or when it is already erased.
  void erase_node(Node* n);
  /// Graph-level spellings of the Node methods.
  std::vector<Node*> replace_all_uses_with(Node* old, Node* replacement,
                                           const std::function<bool(const Node&)>& filter = nullptr);
  void replace_input_with(Node* user, Node* old, Node* replacement);
  /// Renames `n`; throws when the name is taken or not an identifier.
  void rename(Node* n, const std::string& name);
  /// Erases, last to first, every node without users that is not impure (Node::is_impure, or
  /// the given predicate when set). Returns the number of erased nodes.
  size_t eliminate_dead_code(const std::function<bool(const Node&)>& is_impure = nullptr);

  /// Checks every invariant and throws one qflow::Error listing all violations:
  /// each node belongs to this graph; arguments reference nodes of this graph defined
  /// earlier (topological order, no dangling references); names are unique identifiers;
  /// users agree with the arguments; at most one output node, and it is last; per-kind
  /// argument shapes; call_function/call_method targets are registered ops (or fx
  /// builtins like getitem). With an `owner`, call_module targets must be its submodules and
  /// get_attr targets its parameters, buffers (or a GraphModule's constants).
  void lint(const nn::Module* owner = nullptr) const;

  /// A deep copy; `mapping` (optional) receives source node → copy.
  std::unique_ptr<Graph> clone(std::unordered_map<const Node*, Node*>* mapping = nullptr) const;

  // ---- printing ---------------------------------------------------------------------------
  /// torch.fx's text form: "graph():\n    %x : [#users=1] = placeholder[target=x]\n ...".
  std::string to_string() const;
  /// One row per node: opcode, name, target, args, kwargs (torch.fx's print_tabular).
  std::string print_tabular() const;

 private:
  friend class Node;
  friend class InsertGuard;
  std::string unique_name(std::string_view hint);
  /// Throws unless `n` is a live node of this graph; `what` names the caller.
  void check_live(const Node* n, std::string_view what) const;
  /// The node new nodes go before (null: the end).
  Node* insert_position() const;
  Node* insert(std::unique_ptr<Node> node);
  /// Links `n` into the list right before `before` (null: at the end) / takes it out.
  void link_before(Node* n, Node* before);
  void unlink(Node* n);

  // Every node ever created, live or erased, in creation order: the graph owns them all until
  // it dies (Note [Erasing during a walk]). The order of the graph is the linked list.
  std::vector<std::unique_ptr<Node>> owned_;
  Node* head_ = nullptr;
  Node* tail_ = nullptr;
  size_t size_ = 0;
  std::unordered_map<std::string, Node*> by_name_;
  std::unordered_map<std::string, int64_t> name_counters_;
  // Insertion points of the live guards, innermost last (empty: the default point). Each
  // entry means "insert before this node" (null: at the end); erase_node moves entries off an
  // erased node to its successor.
  std::vector<Node*> insert_stack_;
};

/// Names the fx layer treats as functions although they are not registered ops:
/// "getitem" (element i of a node with several outputs).
bool is_builtin_function(std::string_view target);

}  // namespace qflow::fx
