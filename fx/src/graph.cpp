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

// Walks: see Note [Erasing during a walk] in graph.h.
Graph::iterator& Graph::iterator::operator++() {
  // An erased node kept its link to the node that followed it; that one may be erased too.
  do node_ = node_->next_;
  while (node_ != nullptr && node_->erased_);
  return *this;
}

Graph::iterator& Graph::iterator::operator--() {
  if (node_ == nullptr) {
    node_ = graph_->tail_;
    return *this;
  }
  do node_ = node_->prev_;
  while (node_ != nullptr && node_->erased_);
  return *this;
}

void Graph::Snapshot::iterator::skip_erased() {
  while (it_ != end_ && (*it_)->erased()) ++it_;
}

Graph::Snapshot Graph::nodes() const { return Snapshot(std::vector<Node*>(begin(), end())); }

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
  for (Node* n = tail_; n != nullptr; n = n->prev_)
    if (n->op() == NodeOp::Output) return n;
  return nullptr;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (Node* n : *this)
    if (n->op() == NodeOp::Placeholder) out.push_back(n);
  return out;
}

void Graph::check_live(const Node* n, std::string_view what) const {
  QFLOW_CHECK(n != nullptr && &n->graph() == this, "{}: the node is not in this graph", what);
  n->check_live(what);
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

Node* Graph::insert_position() const {
  if (!insert_stack_.empty()) return insert_stack_.back();
  if (tail_ != nullptr && tail_->op() == NodeOp::Output) return tail_;
  return nullptr;
}

void Graph::link_before(Node* n, Node* before) {
  n->next_ = before;
  n->prev_ = before != nullptr ? before->prev_ : tail_;
  (n->prev_ != nullptr ? n->prev_->next_ : head_) = n;
  (before != nullptr ? before->prev_ : tail_) = n;
}

void Graph::unlink(Node* n) {
  // n keeps its own links: a walk standing on an erased node goes on from there.
  (n->prev_ != nullptr ? n->prev_->next_ : head_) = n->next_;
  (n->next_ != nullptr ? n->next_->prev_ : tail_) = n->prev_;
}

Node* Graph::insert(std::unique_ptr<Node> node) {
  // A second output would be appended after the first; everything else goes before it.
  Node* before = node->op() == NodeOp::Output && insert_stack_.empty() ? nullptr : insert_position();
  Node* raw = node.get();
  // Inputs first: a node with an erased argument is refused before it joins the graph.
  raw->refresh_inputs();
  owned_.push_back(std::move(node));
  link_before(raw, before);
  ++size_;
  by_name_[raw->name_] = raw;
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
  check_live(n, "Graph::inserting_before");
  insert_stack_.push_back(n);
  return InsertGuard(*this);
}

InsertGuard Graph::inserting_after(Node* n) {
  check_live(n, "Graph::inserting_after");
  insert_stack_.push_back(n->next_);
  return InsertGuard(*this);
}

void Graph::move_before(Node* n, Node* anchor) {
  check_live(n, "Graph::move_before");
  check_live(anchor, "Graph::move_before");
  if (n == anchor) return;
  // An insertion point on n stays on n, as a std::list iterator would: the points are nodes.
  unlink(n);
  link_before(n, anchor);
}

void Graph::move_after(Node* n, Node* anchor) {
  check_live(n, "Graph::move_after");
  check_live(anchor, "Graph::move_after");
  if (n == anchor) return;
  unlink(n);
  link_before(n, anchor->next_);
}

void Graph::erase_node(Node* n) {
  check_live(n, "Graph::erase_node");
  QFLOW_CHECK(n->users().empty(), "Graph::erase_node: cannot erase %{} because it is still used by {} (replace those uses first)",
              n->name(), describe_users(*n));
  for (Node* input : n->inputs_) input->remove_user(n);
  n->inputs_.clear();
  for (Node*& pos : insert_stack_)
    if (pos == n) pos = n->next_;  // an insertion point on the erased node moves to its successor
  by_name_.erase(n->name_);
  unlink(n);  // n keeps its links and stays alive: Note [Erasing during a walk]
  n->erased_ = true;
  --size_;
}

std::vector<Node*> Graph::replace_all_uses_with(Node* old, Node* replacement, const std::function<bool(const Node&)>& filter) {
  check_live(old, "Graph::replace_all_uses_with");
  return old->replace_all_uses_with(replacement, filter);
}

void Graph::replace_input_with(Node* user, Node* old, Node* replacement) {
  check_live(user, "Graph::replace_input_with");
  user->replace_input_with(old, replacement);
}

void Graph::rename(Node* n, const std::string& name) {
  check_live(n, "Graph::rename");
  if (n->name_ == name) return;
  QFLOW_CHECK(is_identifier(name), "Graph::rename: '{}' is not a valid node name (letters, digits and '_', not starting with a digit)", name);
  QFLOW_CHECK(!by_name_.count(name), "Graph::rename: cannot rename %{} to '{}': the name is taken", n->name_, name);
  by_name_.erase(n->name_);
  n->name_ = name;
  by_name_[name] = n;
}

size_t Graph::eliminate_dead_code(const std::function<bool(const Node&)>& is_impure) {
  size_t erased = 0;
  // Last to first: erasing a node can make its inputs dead, and they come earlier. Only the
  // node in hand is erased, and prev() leads on from it (Note [Erasing during a walk]).
  for (Node* n = tail_; n != nullptr;) {
    Node* previous = n->prev();
    const bool impure = is_impure ? is_impure(*n) : n->is_impure();
    if (n->users().empty() && !impure) {
      erase_node(n);
      ++erased;
    }
    n = previous;
  }
  return erased;
}

std::unique_ptr<Graph> Graph::clone(std::unordered_map<const Node*, Node*>* mapping) const {
  auto copy = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> local;
  auto& map = mapping ? *mapping : local;
  for (const Node* n : *this) {  // the live nodes: an erased node is not part of the graph
    map[n] = copy->node_copy(*n, [&](Node* src) {
      auto it = map.find(src);
      QFLOW_CHECK(it != map.end(), "Graph::clone: %{} uses %{}, which is not defined before it (run lint())", n->name(), src->name());
      return it->second;
    });
  }
  copy->name_counters_ = name_counters_;
  return copy;
}

}  // namespace qflow::fx
