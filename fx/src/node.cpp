// Node: arguments, users (see Note [Users by construction]) and the one-line text form.
#include "qflow/fx/node.h"

#include <algorithm>

#include "qflow/core/error.h"
#include "qflow/core/op_registry.h"
#include "qflow/fx/graph.h"

namespace qflow::fx {

std::string_view op_name(NodeOp op) {
  switch (op) {
    case NodeOp::Placeholder: return "placeholder";
    case NodeOp::GetAttr: return "get_attr";
    case NodeOp::CallFunction: return "call_function";
    case NodeOp::CallModule: return "call_module";
    case NodeOp::CallMethod: return "call_method";
    case NodeOp::Output: return "output";
  }
  return "?";
}

const std::vector<int64_t>& NodeMeta::shape() const {
  QFLOW_CHECK(!outputs.empty(), "node meta: the output shape is unknown (trace the module or run fx::ShapeProp)");
  return outputs[0].sizes;
}

DType NodeMeta::dtype() const {
  QFLOW_CHECK(!outputs.empty(), "node meta: the output dtype is unknown (trace the module or run fx::ShapeProp)");
  return outputs[0].dtype;
}

const MetaValue* NodeMeta::find(const std::string& key) const {
  auto it = extra.find(key);
  return it == extra.end() ? nullptr : &it->second;
}

Node::Node(Graph* graph, NodeOp op, std::string name, std::string target, Arguments args, Kwargs kwargs)
    : graph_(graph), op_(op), name_(std::move(name)), target_(std::move(target)), args_(std::move(args)),
      kwargs_(std::move(kwargs)) {}

Node* Node::next() const {
  Node* n = next_;
  while (n != nullptr && n->erased_) n = n->next_;
  return n;
}

Node* Node::prev() const {
  Node* n = prev_;
  while (n != nullptr && n->erased_) n = n->prev_;
  return n;
}

void Node::check_live(std::string_view what) const {
  QFLOW_CHECK(!erased_, "{}: %{} was erased from its graph (Graph::erase_node); it can no longer be used", what, name_);
}

void Node::add_user(Node* user) {
  if (std::find(users_.begin(), users_.end(), user) == users_.end()) users_.push_back(user);
}

void Node::remove_user(Node* user) { std::erase(users_, user); }

std::vector<Node*> Node::input_nodes_of(const Arguments& args, const Kwargs& kwargs) const {
  std::vector<Node*> fresh;
  auto collect = [&](Node* n) {
    QFLOW_CHECK(n != nullptr, "fx: node %{} got a null node argument", name_);
    QFLOW_CHECK(!n->erased_, "fx: node %{} got the erased node %{} as an argument (Graph::erase_node)", name_, n->name_);
    if (std::find(fresh.begin(), fresh.end(), n) == fresh.end()) fresh.push_back(n);
  };
  for (const Argument& a : args) for_each_node(a, collect);
  for (const auto& [key, a] : kwargs) for_each_node(a, collect);
  return fresh;
}

void Node::refresh_inputs() { assign(args_, kwargs_); }

void Node::assign(Arguments args, Kwargs kwargs) {
  // Checked before anything changes: a refused argument leaves the node as it was.
  std::vector<Node*> fresh = input_nodes_of(args, kwargs);
  args_ = std::move(args);
  kwargs_ = std::move(kwargs);
  for (Node* old : inputs_)
    if (std::find(fresh.begin(), fresh.end(), old) == fresh.end()) old->remove_user(this);
  for (Node* n : fresh) n->add_user(this);
  inputs_ = std::move(fresh);
}

const Argument* Node::arg(std::string_view name) const {
  QFLOW_CHECK(op_ == NodeOp::CallFunction || op_ == NodeOp::CallMethod,
              "Node::arg: %{} is a {} node; only calls of registered ops name their arguments", name_, op_name(op_));
  const OpSchema& schema = OpRegistry::instance().get(target_).schema;
  const auto index = schema.arg_index(name);
  if (!index) {
    std::vector<std::string_view> names;
    for (const ArgSpec& spec : schema.args) names.push_back(spec.name);
    QFLOW_FAIL("Node::arg: %{} calls {}, which has no argument named '{}'; its schema declares ({})", name_, target_,
               name, fmt::join(names, ", "));
  }
  if (*index < args_.size()) return &args_[*index];
  for (const auto& [key, value] : kwargs_)
    if (key == name) return &value;
  return nullptr;
}

void Node::set_args(Arguments args) {
  check_live("Node::set_args");
  assign(std::move(args), kwargs_);
}

void Node::set_kwargs(Kwargs kwargs) {
  check_live("Node::set_kwargs");
  assign(args_, std::move(kwargs));
}

void Node::set_arg(size_t index, Argument value) {
  check_live("Node::set_arg");
  QFLOW_CHECK(index < args_.size(), "Node::set_arg: %{} has {} arguments, no index {}", name_, args_.size(), index);
  Arguments args = args_;
  args[index] = std::move(value);
  assign(std::move(args), kwargs_);
}

void Node::set_kwarg(const std::string& key, Argument value) {
  check_live("Node::set_kwarg");
  Kwargs kwargs = kwargs_;
  auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == key; });
  if (it == kwargs.end()) kwargs.emplace_back(key, std::move(value));
  else it->second = std::move(value);
  assign(args_, std::move(kwargs));
}

bool Node::erase_kwarg(const std::string& key) {
  check_live("Node::erase_kwarg");
  Kwargs kwargs = kwargs_;
  const size_t n = std::erase_if(kwargs, [&](const auto& kv) { return kv.first == key; });
  assign(args_, std::move(kwargs));
  return n > 0;
}

void Node::replace_input_with(Node* old, Node* replacement) {
  check_live("Node::replace_input_with");
  auto swap = [&](Node* n) { return n == old ? replacement : n; };
  Arguments args = args_;
  Kwargs kwargs = kwargs_;
  for (Argument& a : args) a = map_nodes(a, swap);
  for (auto& [key, a] : kwargs) a = map_nodes(a, swap);
  assign(std::move(args), std::move(kwargs));
}

std::vector<Node*> Node::replace_all_uses_with(Node* replacement, const std::function<bool(const Node&)>& filter) {
  QFLOW_CHECK(replacement != nullptr, "Node::replace_all_uses_with: the replacement of %{} is null", name_);
  check_live("Node::replace_all_uses_with");
  replacement->check_live("Node::replace_all_uses_with");
  std::vector<Node*> changed;
  if (replacement == this) return changed;
  const std::vector<Node*> users = users_;  // replace_input_with edits users_
  for (Node* u : users) {
    if (filter && !filter(*u)) continue;
    u->replace_input_with(this, replacement);
    changed.push_back(u);
  }
  return changed;
}

bool Node::is_impure() const {
  if (op_ == NodeOp::Placeholder || op_ == NodeOp::Output) return true;
  if (op_ == NodeOp::CallFunction || op_ == NodeOp::CallMethod) {
    const OpDef* def = OpRegistry::instance().find(target_);
    return def != nullptr && def->schema.mutated_arg().has_value();
  }
  return false;
}

std::string Node::format() const {
  const std::string head = fmt::format("%{} : [#users={}] = {}[target={}]", name_, users_.size(), op_name(op_), target_);
  switch (op_) {
    case NodeOp::Placeholder:
    case NodeOp::GetAttr:
      return head;
    case NodeOp::Output: {
      if (args_.empty()) return "return None";
      const Argument& r = args_[0];
      if (r.is_node()) return "return " + r.node()->name();
      if (r.is_node_list()) {
        std::vector<std::string> names;
        for (Node* n : r.node_list()) names.push_back(n->name());
        return fmt::format("return ({}{})", fmt::join(names, ", "), names.size() == 1 ? "," : "");
      }
      return "return " + format_argument(r);
    }
    default:
      return fmt::format("{}(args = {}, kwargs = {})", head, format_arguments(args_), format_kwargs(kwargs_));
  }
}

}  // namespace qflow::fx
