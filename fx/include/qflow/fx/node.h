#pragma once
// Node: one instruction of an fx Graph (torch.fx's Node, in C++).
//
// Note [Users by construction]
// `users` is derived data: node u is a user of node n exactly when n appears in u's args or
// kwargs. Node keeps it right by construction: args and kwargs are private and every mutation
// (set_args, set_kwarg, replace_input_with, Graph::erase_node, ...) goes through one place
// that recomputes the node's inputs and patches its old and new inputs' users. Users are
// insertion-ordered and unique (a node reading %x twice is one user of %x). Graph::lint()
// re-derives users from the arguments and compares, so a broken invariant cannot go unseen.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "qflow/core/op_registry.h"
#include "qflow/fx/argument.h"

namespace qflow::fx {

class Graph;

namespace detail {
struct NodeTestAccess;  // defined by tests that corrupt a node on purpose to exercise lint()
}

/// What a node does; the names print as in torch.fx.
enum class NodeOp : uint8_t {
  Placeholder,   // an input of the graph (target: the input's name)
  GetAttr,       // reads a parameter, buffer or constant (target: its dotted path)
  CallFunction,  // calls a registered op by name (target: "add", "conv2d", "max.dim", ...)
  CallModule,    // calls a submodule (target: its dotted path, "layer1.0.conv1")
  CallMethod,    // calls a registered op as a tensor method: args[0] is `self`
  Output,        // the graph's result (args[0]: a node or a list of nodes)
};

/// "placeholder", "get_attr", "call_function", "call_module", "call_method", "output".
std::string_view op_name(NodeOp op);

/// A free annotation of a node: text or a number.
using MetaValue = std::variant<std::string, double>;

/// What is known about a node's value. Tracing fills `outputs` with the trace-time sizes,
/// ShapeProp with the sizes of its run; passes add `extra` entries. By convention, keys
/// starting with "quant." carry quantization info (e.g. "quant.bits", "quant.scheme",
/// "quant.scale"), which to_dot() renders. One key has a meaning at run time: "no_grad" (1)
/// marks a node traced inside a NoGradGuard, which the Interpreter runs with grad mode off.
/// Other keys are free for any pass.
struct NodeMeta {
  /// Shape and dtype of each tensor output (empty when unknown or not a tensor).
  std::vector<TensorMeta> outputs;
  std::map<std::string, MetaValue> extra;

  bool has_shape() const { return !outputs.empty(); }
  /// Sizes of output 0; throws when unknown.
  const std::vector<int64_t>& shape() const;
  /// Dtype of output 0; throws when unknown.
  DType dtype() const;
  void set(const std::string& key, MetaValue value) { extra[key] = std::move(value); }
  /// Null when absent.
  const MetaValue* find(const std::string& key) const;
};

class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  NodeOp op() const { return op_; }
  /// Unique within the graph; a valid identifier ("conv1", "add_1", "layer1_0_conv1").
  const std::string& name() const { return name_; }
  const std::string& target() const { return target_; }
  const Arguments& args() const { return args_; }
  const Kwargs& kwargs() const { return kwargs_; }
  /// The argument `name` of a call_function or call_method node, as its op's schema names it
  /// (Note [Arguments by name]), recorded by position or by keyword; null when left to its
  /// default. Throws qflow::Error for any other kind of node or a name the schema lacks.
  const Argument* arg(std::string_view name) const;
  /// Nodes reading this node's value, in the order they started to; see Note [Users by construction].
  const std::vector<Node*>& users() const { return users_; }
  /// Nodes this node reads (args, then kwargs), each once, in order of first appearance.
  const std::vector<Node*>& all_input_nodes() const { return inputs_; }
  Graph& graph() const { return *graph_; }
  /// True once Graph::erase_node removed it: the node is out of the graph's order, kept alive
  /// by the graph and no longer usable (Note [Erasing during a walk] in graph.h).
  bool erased() const { return erased_; }
  /// Live neighbours in the graph's order; null at the ends. For an erased node, the live nodes
  /// that followed and preceded it.
  Node* next() const;
  Node* prev() const;

  NodeMeta& meta() { return meta_; }
  const NodeMeta& meta() const { return meta_; }

  // ---- mutation (users stay consistent; see Note [Users by construction]) ---------------
  void set_args(Arguments args);
  void set_kwargs(Kwargs kwargs);
  void set_arg(size_t index, Argument value);
  /// Sets keyword argument `key`, appending it when absent.
  void set_kwarg(const std::string& key, Argument value);
  /// Removes keyword argument `key`; returns whether it was there.
  bool erase_kwarg(const std::string& key);
  /// Changes the target (lint() checks that it exists).
  void set_target(std::string target) { target_ = std::move(target); }
  /// Replaces every use of `old` in this node's args/kwargs with `replacement`.
  void replace_input_with(Node* old, Node* replacement);
  /// Makes every user of this node (for which `filter` holds) read `replacement` instead;
  /// returns the users that changed.
  std::vector<Node*> replace_all_uses_with(Node* replacement,
                                           const std::function<bool(const Node&)>& filter = nullptr);

  /// True for nodes dead-code elimination must keep although nobody reads them:
  /// placeholders, the output, and ops that write into an argument (add_, copy_, ...).
  bool is_impure() const;
  /// The node as one line of torch.fx's text form:
  /// `%conv1 : [#users=1] = call_module[target=conv1](args = (%x,), kwargs = {})`.
  std::string format() const;

 private:
  friend class Graph;
  friend struct detail::NodeTestAccess;
  Node(Graph* graph, NodeOp op, std::string name, std::string target, Arguments args, Kwargs kwargs);
  /// Recomputes inputs_ from args_/kwargs_ and patches users of old and new inputs.
  void refresh_inputs();
  /// Sets args_/kwargs_ and refreshes the inputs; throws, changing nothing, when an argument
  /// is a null or erased node.
  void assign(Arguments args, Kwargs kwargs);
  /// The nodes `args` and `kwargs` reference, each once, in order; throws for null or erased.
  std::vector<Node*> input_nodes_of(const Arguments& args, const Kwargs& kwargs) const;
  /// Throws when the node is erased; `what` names the caller.
  void check_live(std::string_view what) const;
  void remove_user(Node* user);
  void add_user(Node* user);

  Graph* graph_;
  NodeOp op_;
  std::string name_;
  std::string target_;
  Arguments args_;
  Kwargs kwargs_;
  std::vector<Node*> inputs_;
  std::vector<Node*> users_;
  NodeMeta meta_;
  // The graph's doubly linked list. An erased node keeps the links it had when it was erased,
  // so a walk standing on it can go on (Note [Erasing during a walk]).
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  bool erased_ = false;
};

}  // namespace qflow::fx
