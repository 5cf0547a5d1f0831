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
// Nodes live in a std::list of unique_ptrs, so a Node* stays valid until that node is
// erased, whatever is inserted, moved or erased around it. Without an insertion guard, new
// nodes go before the output node when there is one and at the end otherwise.
#include <cstdint>
#include <functional>
#include <iterator>
#include <list>
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

class Graph {
  using NodeStore = std::list<std::unique_ptr<Node>>;

 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // ---- iteration (in order; erasing the node you stand on invalidates the iterator: use
  // nodes() to iterate over a snapshot while mutating) ---------------------------------------
  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node* const*;
    using reference = Node*;
    iterator() = default;
    explicit iterator(NodeStore::const_iterator it) : it_(it) {}
    Node* operator*() const { return it_->get(); }
    iterator& operator++() { ++it_; return *this; }
    iterator operator++(int) { return iterator(it_++); }
    iterator& operator--() { --it_; return *this; }
    iterator operator--(int) { return iterator(it_--); }
    bool operator==(const iterator& o) const { return it_ == o.it_; }

   private:
    NodeStore::const_iterator it_;
  };
  iterator begin() const { return iterator(nodes_.begin()); }
  iterator end() const { return iterator(nodes_.end()); }
  size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  /// A snapshot of the nodes in order (safe to iterate while mutating the graph).
  std::vector<Node*> nodes() const;
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
  /// Erases an unused node and destroys it. Throws qflow::Error naming the node and its
  /// users when it still has any (replace those uses first).
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
  NodeStore::iterator insert_position();
  Node* insert(std::unique_ptr<Node> node);

  NodeStore nodes_;
  std::unordered_map<std::string, Node*> by_name_;
  std::unordered_map<std::string, int64_t> name_counters_;
  // Insertion points of the live guards, innermost last (empty: the default point). Each
  // entry means "insert before this position"; erase_node moves entries off an erased node.
  std::vector<NodeStore::iterator> insert_stack_;
};

/// Names the fx layer treats as functions although they are not registered ops:
/// "getitem" (element i of a node with several outputs).
bool is_builtin_function(std::string_view target);

}  // namespace qflow::fx
