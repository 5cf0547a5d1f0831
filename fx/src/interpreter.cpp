// Interpreter: runs a graph node by node, freeing each value after its last use.
#include "qflow/fx/interpreter.h"

#include <optional>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/dispatch.h"
#include "qflow/fx/trace_error.h"

namespace qflow::fx {

Stack bind_arguments(const OpSchema& schema, const Stack& args, const ValueKwargs& kwargs) {
  const std::string op = schema.full_name();
  QFLOW_CHECK(args.size() <= schema.args.size(), "{}: expected at most {} positional arguments, got {}", op,
              schema.args.size(), args.size());
  Stack bound(args);
  for (size_t i = args.size(); i < schema.args.size(); ++i) {
    const ArgSpec& spec = schema.args[i];
    const Value* given = nullptr;
    for (const auto& [k, v] : kwargs)
      if (k == spec.name) given = &v;
    if (given) bound.push_back(*given);
    else if (spec.default_value) bound.push_back(*spec.default_value);
    else QFLOW_FAIL("{}: missing argument '{}' ({})", op, spec.name, arg_type_name(spec.type));
  }
  for (const auto& [k, v] : kwargs) {
    auto index = schema.arg_index(k);
    QFLOW_CHECK(index.has_value(), "{}: unexpected keyword argument '{}'", op, k);
    QFLOW_CHECK(*index >= args.size(), "{}: argument '{}' given both by position and by keyword", op, k);
  }
  normalize_args(schema, bound);  // checks each value's kind against the schema
  return bound;
}

namespace {

// Rethrows `e` with the node in front of its message, keeping TraceError a TraceError.
[[noreturn]] void rethrow_at(const Node& node, const Error& e) {
  const std::string msg = fmt::format("while executing {}: {}", node.format(), e.message());
  if (dynamic_cast<const TraceError*>(&e)) throw TraceError(msg, __FILE__, __LINE__);
  throw Error(msg, __FILE__, __LINE__);
}

bool runs_without_grad(const Node& node) {
  const MetaValue* v = node.meta().find("no_grad");
  return v != nullptr && std::holds_alternative<double>(*v) && std::get<double>(*v) != 0.0;
}

}  // namespace

TensorList Interpreter::run(const TensorList& inputs) {
  const Graph& graph = module_.graph();
  const std::vector<Node*> placeholders = graph.placeholders();
  if (inputs.size() != placeholders.size()) {
    std::vector<std::string> names;
    for (const Node* p : placeholders) names.push_back(p->name());
    QFLOW_FAIL("{}: forward takes {} input{} ({}), got {}", module_.type_name(), placeholders.size(),
               placeholders.size() == 1 ? "" : "s", fmt::join(names, ", "), inputs.size());
  }
  // The last node reading each value: the value is dropped right after that node ran.
  std::unordered_map<const Node*, const Node*> last_use;
  for (const Node* n : graph)
    for (const Node* in : n->all_input_nodes()) last_use[in] = n;

  env_.clear();
  inputs_ = &inputs;
  next_input_ = 0;
  TensorList result;
  for (Node* n : graph) {
    Stack out;
    try {
      std::optional<NoGradGuard> no_grad;
      if (runs_without_grad(*n)) no_grad.emplace();
      out = run_node(*n);
    } catch (const Error& e) {
      env_.clear();
      rethrow_at(*n, e);
    }
    if (n->op() == NodeOp::Output) {
      for (Value& v : out) result.push_back(std::move(v.tensor()));
    } else if (!n->users().empty()) {
      env_[n] = std::move(out);
    }
    for (const Node* in : n->all_input_nodes())
      if (last_use[in] == n) env_.erase(in);
  }
  env_.clear();
  inputs_ = nullptr;
  return result;
}

Stack Interpreter::run_node(Node& node) {
  switch (node.op()) {
    case NodeOp::Placeholder:
      QFLOW_ASSERT(inputs_ != nullptr && next_input_ < inputs_->size(), "placeholder %{} has no input", node.name());
      return placeholder(node, (*inputs_)[next_input_++]);
    case NodeOp::GetAttr:
      return get_attr(node);
    case NodeOp::CallFunction:
      return call_function(node, fetch_args(node), fetch_kwargs(node));
    case NodeOp::CallModule:
      return call_module(node, fetch_args(node), fetch_kwargs(node));
    case NodeOp::CallMethod:
      return call_method(node, fetch_args(node), fetch_kwargs(node));
    case NodeOp::Output:
      return output(node, fetch_args(node));
  }
  QFLOW_ASSERT(false, "unknown node kind");
}

Stack Interpreter::placeholder(Node&, const Tensor& input) { return Stack{Value(input)}; }

Stack Interpreter::get_attr(Node& node) { return Stack{Value(module_.get_attr(node.target()))}; }

Stack Interpreter::call_function(Node& node, const Stack& args, const ValueKwargs& kwargs) {
  if (node.target() == "getitem") {
    QFLOW_CHECK(args.size() == 2 && args[0].is_tensor_list() && args[1].is_int() && kwargs.empty(),
                "getitem: expected (a node with several outputs, an index)");
    const TensorList& list = args[0].tensor_list();
    const int64_t i = args[1].to_int();
    QFLOW_CHECK(i >= 0 && i < static_cast<int64_t>(list.size()), "getitem: index {} out of range for {} outputs", i, list.size());
    return Stack{Value(list[static_cast<size_t>(i)])};
  }
  const OpDef& op = OpRegistry::instance().get(node.target());
  return Dispatcher::call(op, bind_arguments(op.schema, args, kwargs));
}

Stack Interpreter::call_method(Node& node, const Stack& args, const ValueKwargs& kwargs) {
  QFLOW_CHECK(!args.empty() && args[0].is_tensor(), "call_method {}: the first argument must be the tensor `self`", node.target());
  const OpDef& op = OpRegistry::instance().get(node.target());
  return Dispatcher::call(op, bind_arguments(op.schema, args, kwargs));
}

Stack Interpreter::call_module(Node& node, const Stack& args, const ValueKwargs& kwargs) {
  QFLOW_CHECK(kwargs.empty(), "call_module {}: modules take no keyword arguments", node.target());
  TensorList inputs;
  for (const Value& v : args) {
    QFLOW_CHECK(v.is_tensor() || v.is_none(), "call_module {}: module inputs must be tensors, got {}", node.target(), v.kind_name());
    inputs.push_back(v.is_none() ? Tensor() : v.tensor());
  }
  TensorList outputs = module_.get_submodule(node.target())->call(inputs);
  Stack out;
  out.reserve(outputs.size());
  for (Tensor& t : outputs) out.emplace_back(std::move(t));
  return out;
}

Stack Interpreter::output(Node&, const Stack& args) {
  QFLOW_CHECK(args.size() == 1, "output: expected one argument, got {}", args.size());
  if (args[0].is_tensor_list()) {
    Stack out;
    for (const Tensor& t : args[0].tensor_list()) out.push_back(Value(t));
    return out;
  }
  if (args[0].is_none()) return Stack{Value(Tensor())};
  return Stack{args[0]};
}

const Stack& Interpreter::env(const Node& node) const {
  auto it = env_.find(&node);
  QFLOW_CHECK(it != env_.end(), "%{} has no value in this run (used before it ran, after its last use, or not in this graph)",
              node.name());
  return it->second;
}

Value Interpreter::node_value(const Node& node) const {
  const Stack& s = env(node);
  if (s.size() == 1) return s[0];
  TensorList list;
  for (const Value& v : s) {
    QFLOW_CHECK(v.is_tensor(), "%{} has several outputs and not all are tensors", node.name());
    list.push_back(v.tensor());
  }
  return Value(std::move(list));
}

Value Interpreter::value_of(const Argument& arg) const {
  if (arg.is_node()) return node_value(*arg.node());
  if (arg.is_node_list()) {
    TensorList list;
    for (Node* n : arg.node_list()) list.push_back(node_value(*n).tensor());
    return Value(std::move(list));
  }
  if (arg.is_int_list()) {
    SymIntList list;
    for (const IntOrNode& e : arg.int_list()) {
      if (const auto* n = std::get_if<Node*>(&e)) list.push_back(node_value(**n).sym_int());
      else list.emplace_back(std::get<int64_t>(e));
    }
    return Value(std::move(list));
  }
  struct Visitor {
    Value operator()(std::monostate) const { return Value(); }
    Value operator()(int64_t v) const { return Value(v); }
    Value operator()(double v) const { return Value(v); }
    Value operator()(bool v) const { return Value(v); }
    Value operator()(const std::string& v) const { return Value(v); }
    Value operator()(DType v) const { return Value(v); }
    Value operator()(Node*) const { return Value(); }
    Value operator()(const IntListArg&) const { return Value(); }
    Value operator()(const NodeList&) const { return Value(); }
  };
  return std::visit(Visitor{}, arg.storage());
}

Stack Interpreter::fetch_args(const Node& node) const {
  Stack out;
  out.reserve(node.args().size());
  for (const Argument& a : node.args()) out.push_back(value_of(a));
  return out;
}

ValueKwargs Interpreter::fetch_kwargs(const Node& node) const {
  ValueKwargs out;
  for (const auto& [k, a] : node.kwargs()) out.emplace_back(k, value_of(a));
  return out;
}

}  // namespace qflow::fx
