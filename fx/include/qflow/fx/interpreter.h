#pragma once
// Interpreter: runs a GraphModule's graph node by node (torch.fx's Interpreter, in C++).
//
// Every node yields a Stack: its op's outputs (one Value for most nodes, several for ops and
// modules with several outputs). A Node* argument stands for the node's value: its single
// output, or the list of its outputs when it has several (so `getitem(%max, 0)` and
// `cat(%split)` both work). Values are freed right after their last use, so a long graph
// holds no more activations than eager code would.
//
// Passes observe or change a run by overriding one method per op kind:
//
//   struct CountCalls : fx::Interpreter {
//     using Interpreter::Interpreter;
//     int calls = 0;
//     Stack call_module(Node& n, const Stack& args, const ValueKwargs& kw) override {
//       ++calls;
//       return Interpreter::call_module(n, args, kw);
//     }
//   };
//
// call_function runs the registered op through the dispatcher (Dispatcher::call), exactly
// the road an eager call takes, so autograd records every op and tracing a GraphModule again
// works. An error thrown while running a node is rethrown (as the same qflow::Error or
// fx::TraceError type) with "while executing <the node>: " in front of its message.
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qflow/core/value.h"
#include "qflow/fx/graph_module.h"

namespace qflow::fx {

using ValueKwargs = std::vector<std::pair<std::string, Value>>;

class Interpreter {
 public:
  explicit Interpreter(GraphModule& module) : module_(module) {}
  virtual ~Interpreter() = default;
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Runs the graph on one input per placeholder; returns the output node's tensors.
  TensorList run(const TensorList& inputs);
  TensorList run(const Tensor& input) { return run(TensorList{input}); }

 protected:
  /// Runs one node: fetches its arguments and calls the method of its op kind. The output
  /// node's Stack holds the returned tensors.
  virtual Stack run_node(Node& node);
  virtual Stack placeholder(Node& node, const Tensor& input);
  virtual Stack get_attr(Node& node);
  virtual Stack call_function(Node& node, const Stack& args, const ValueKwargs& kwargs);
  virtual Stack call_module(Node& node, const Stack& args, const ValueKwargs& kwargs);
  /// A method call runs the registered op of that name with args[0] as `self`.
  virtual Stack call_method(Node& node, const Stack& args, const ValueKwargs& kwargs);
  virtual Stack output(Node& node, const Stack& args);

  /// The node's arguments with every node reference replaced by its value.
  Stack fetch_args(const Node& node) const;
  ValueKwargs fetch_kwargs(const Node& node) const;
  Value value_of(const Argument& arg) const;
  /// The value a node produced in this run; throws when it has none (yet, or any more).
  const Stack& env(const Node& node) const;
  GraphModule& module() const { return module_; }

 private:
  Value node_value(const Node& node) const;

  GraphModule& module_;
  std::unordered_map<const Node*, Stack> env_;
  const TensorList* inputs_ = nullptr;
  size_t next_input_ = 0;
};

/// Binds positional arguments, keyword arguments and schema defaults into the op's full
/// argument list (what Dispatcher::call takes); throws naming the op and argument.
Stack bind_arguments(const OpSchema& schema, const Stack& args, const ValueKwargs& kwargs);

}  // namespace qflow::fx
