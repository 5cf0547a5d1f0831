// Graph: node creation, insertion points, rewriting, dead code elimination and copying.
// Linting lives in graph_lint.cpp, printing in graph_print.cpp.
#include "qflow/fx/graph.h"

#include <algorithm>
#include <cctype>

#include "qflow/core/error.h"

namespace qflow::fx {

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// "layer1.0.conv1" → "layer1_0_conv1", "max.dim" → "max_dim", "0" → "_0".
std::string sanitize(std::string_view hint) {
  std::string s;
  if (hint.empty() || std::isdigit(static_cast<unsigned char>(hint[0]))) s.push_back('_');
  for (char c : hint) s.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s;
}

std::string describe_users(const Node& n) {
  std::vector<std::string> names;
  for (const Node* u : n.users()) names.push_back("%" + u->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

bool is_builtin_function(std::string_view target) { return target == "getitem"; }

InsertGuard::~InsertGuard() { graph_.insert_stack_.pop_back(); }

Graph::~Graph() = default;

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Node* Graph::find_node(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

Node& Graph::node(std::string_view name) const {
  Node* n = find_node(name);
  QFLOW_CHECK(n != nullptr, "Graph: no node named '{}'", name);
  return *n;
}

Node* Graph::output_node() const {
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
    if ((*it)->op() == NodeOp::Output) return it->get();
  return nullptr;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_)
    if (n->op() == NodeOp::Placeholder) out.push_back(n.get());
  return out;
}

std::string Graph::unique_name(std::string_view hint) {
  std::string base = sanitize(hint);
  if (!by_name_.count(base)) return base;
  // "add_1" taken as a hint continues the counter of "add".
  if (auto us = base.rfind('_'); us != std::string::npos && us + 1 < base.size() &&
                                 std::all_of(base.begin() + static_cast<std::ptrdiff_t>(us) + 1, base.end(), ::isdigit)) {
    base = base.substr(0, us);
  }
  int64_t& counter = name_counters_[base];
  std::string candidate;
  do {
    candidate = fmt::format("{}_{}", base, ++counter);
  } while (by_name_.count(candidate));
  return candidate;
}

Graph::NodeStore::iterator Graph::insert_position() {
  if (!insert_stack_.empty()) return insert_stack_.back();
  if (!nodes_.empty() && nodes_.back()->op() == NodeOp::Output) return std::prev(nodes_.end());
  return nodes_.end();
}

Node* Graph::insert(std::unique_ptr<Node> node) {
  // A second output would be appended after the first; everything else goes before it.
  auto pos = node->op() == NodeOp::Output && insert_stack_.empty() ? nodes_.end() : insert_position();
  Node* raw = node.get();
  raw->position_ = nodes_.insert(pos, std::move(node));
  by_name_[raw->name_] = raw;
  raw->refresh_inputs();
  return raw;
}

Node* Graph::create_node(NodeOp op, std::string target, Arguments args, Kwargs kwargs, std::string_view name_hint) {
  std::string name = unique_name(name_hint.empty() ? std::string_view(target) : name_hint);
  return insert(std::unique_ptr<Node>(new Node(this, op, std::move(name), std::move(target), std::move(args), std::move(kwargs))));
}

Node* Graph::placeholder(std::string name) {
  const std::string hint = name;
  return create_node(NodeOp::Placeholder, std::move(name), {}, {}, hint);
}

Node* Graph::get_attr(std::string path) { return create_node(NodeOp::GetAttr, std::move(path)); }

Node* Graph::call_function(std::string op, Arguments args, Kwargs kwargs) {
  // Name after the op without its overload: "max.dim" → %max.
  const std::string hint = op.substr(0, op.find('.'));
  return create_node(NodeOp::CallFunction, std::move(op), std::move(args), std::move(kwargs), hint);
}

Node* Graph::call_module(std::string path, Arguments args, Kwargs kwargs) {
  return create_node(NodeOp::CallModule, std::move(path), std::move(args), std::move(kwargs));
}

Node* Graph::call_method(std::string method, Arguments args, Kwargs kwargs) {
  return create_node(NodeOp::CallMethod, std::move(method), std::move(args), std::move(kwargs));
}

Node* Graph::output(Argument result) { return create_node(NodeOp::Output, "output", {std::move(result)}); }

Node* Graph::node_copy(const Node& source, const std::function<Node*(Node*)>& map) {
  Arguments args;
  for (const Argument& a : source.args()) args.push_back(map_nodes(a, map));
  Kwargs kwargs;
  for (const auto& [k, a] : source.kwargs()) kwargs.emplace_back(k, map_nodes(a, map));
  Node* n = create_node(source.op(), source.target(), std::move(args), std::move(kwargs), source.name());
  n->meta() = source.meta();
  return n;
}

InsertGuard Graph::inserting_before(Node* n) {
  QFLOW_CHECK(n != nullptr && &n->graph() == this, "Graph::inserting_before: the anchor node is not in this graph");
  insert_stack_.push_back(n->position_);
  return InsertGuard(*this);
}

InsertGuard Graph::inserting_after(Node* n) {
  QFLOW_CHECK(n != nullptr && &n->graph() == this, "Graph::inserting_after: the anchor node is not in this graph");
  insert_stack_.push_back(std::next(n->position_));
  return InsertGuard(*this);
}

void Graph::move_before(Node* n, Node* anchor) {
  QFLOW_CHECK(n && anchor && &n->graph() == this && &anchor->graph() == this,
              "Graph::move_before: both nodes must belong to this graph");
  if (n == anchor) return;
  nodes_.splice(anchor->position_, nodes_, n->position_);
}

void Graph::move_after(Node* n, Node* anchor) {
  QFLOW_CHECK(n && anchor && &n->graph() == this && &anchor->graph() == this,
              "Graph::move_after: both nodes must belong to this graph");
  if (n == anchor) return;
  nodes_.splice(std::next(anchor->position_), nodes_, n->position_);
}

void Graph::erase_node(Node* n) {
  QFLOW_CHECK(n != nullptr && &n->graph() == this, "Graph::erase_node: the node is not in this graph");
  QFLOW_CHECK(n->users().empty(), "Graph::erase_node: cannot erase %{} because it is still used by {} (replace those uses first)",
              n->name(), describe_users(*n));
  for (Node* input : n->inputs_) input->remove_user(n);
  n->inputs_.clear();
  for (auto& pos : insert_stack_)
    if (pos == n->position_) ++pos;  // an insertion point on the erased node moves to its successor
  by_name_.erase(n->name_);
  nodes_.erase(n->position_);
}

std::vector<Node*> Graph::replace_all_uses_with(Node* old, Node* replacement, const std::function<bool(const Node&)>& filter) {
  QFLOW_CHECK(old != nullptr && &old->graph() == this, "Graph::replace_all_uses_with: the node is not in this graph");
  return old->replace_all_uses_with(replacement, filter);
}

void Graph::replace_input_with(Node* user, Node* old, Node* replacement) {
  QFLOW_CHECK(user != nullptr && &user->graph() == this, "Graph::replace_input_with: the user node is not in this graph");
  user->replace_input_with(old, replacement);
}

void Graph::rename(Node* n, const std::string& name) {
  QFLOW_CHECK(n != nullptr && &n->graph() == this, "Graph::rename: the node is not in this graph");
  if (n->name_ == name) return;
  QFLOW_CHECK(is_identifier(name), "Graph::rename: '{}' is not a valid node name (letters, digits and '_', not starting with a digit)", name);
  QFLOW_CHECK(!by_name_.count(name), "Graph::rename: cannot rename %{} to '{}': the name is taken", n->name_, name);
  by_name_.erase(n->name_);
  n->name_ = name;
  by_name_[name] = n;
}

size_t Graph::eliminate_dead_code(const std::function<bool(const Node&)>& is_impure) {
  size_t erased = 0;
  // Last to first: erasing a node can make its inputs dead, and they come earlier.
  // Plain iterators walked backwards: a reverse_iterator refers to its element through the
  // successor, which may be the node just erased.
  for (auto it = nodes_.end(); it != nodes_.begin();) {
    Node* n = (--it)->get();
    const bool impure = is_impure ? is_impure(*n) : n->is_impure();
    if (!n->users().empty() || impure) continue;
    it = std::next(it);  // the successor survives the erasure; the loop steps back from it
    erase_node(n);
    ++erased;
  }
  return erased;
}

std::unique_ptr<Graph> Graph::clone(std::unordered_map<const Node*, Node*>* mapping) const {
  auto copy = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> local;
  auto& map = mapping ? *mapping : local;
  for (const auto& n : nodes_) {
    map[n.get()] = copy->node_copy(*n, [&](Node* src) {
      auto it = map.find(src);
      QFLOW_CHECK(it != map.end(), "Graph::clone: %{} uses %{}, which is not defined before it (run lint())", n->name(), src->name());
      return it->second;
    });
  }
  copy->name_counters_ = name_counters_;
  return copy;
}

}  // namespace qflow::fx
