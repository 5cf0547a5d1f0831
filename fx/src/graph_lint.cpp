// Graph::lint: re-derives every invariant from scratch and reports all violations at once.
#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "qflow/core/error.h"
#include "qflow/fx/graph.h"
#include "qflow/fx/graph_module.h"

namespace qflow::fx {

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool contains(const std::vector<Node*>& v, const Node* n) { return std::find(v.begin(), v.end(), n) != v.end(); }

// Nodes referenced by a node's args and kwargs, each once, in order.
std::vector<Node*> referenced_nodes(const Node& n) {
  std::vector<Node*> out;
  auto add = [&](Node* x) {
    if (!contains(out, x)) out.push_back(x);
  };
  for (const Argument& a : n.args()) for_each_node(a, add);
  for (const auto& [k, a] : n.kwargs()) for_each_node(a, add);
  return out;
}

bool has_submodule(const nn::Module& owner, const std::string& path) {
  try {
    owner.get_submodule(path);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool has_attribute(const nn::Module& owner, const std::string& path) {
  if (const auto* gm = dynamic_cast<const GraphModule*>(&owner)) return gm->has_attr(path);
  for (auto getter : {&nn::Module::get_parameter, &nn::Module::get_buffer}) {
    try {
      (owner.*getter)(path);
      return true;
    } catch (const Error&) {
    }
  }
  return false;
}

class Linter {
 public:
  Linter(const Graph& g, const nn::Module* owner) : graph_(g), owner_(owner) {}

  std::vector<std::string> run() {
    size_t index = 0;
    for (Node* n : graph_) position_[n] = index++;
    std::unordered_set<std::string> names;
    size_t outputs = 0;
    for (Node* n : graph_) {
      if (&n->graph() != &graph_) problem("%{} claims to belong to another graph", n->name());
      if (!is_identifier(n->name())) problem("%{} has a name that is not a valid identifier", n->name());
      if (!names.insert(n->name()).second) problem("two nodes are named '{}'", n->name());
      if (n->op() == NodeOp::Output) {
        ++outputs;
        if (n->next() != nullptr) problem("the output node %{} is followed by %{}; it must be last", n->name(), n->next()->name());
      }
      check_inputs(*n);
      check_users(*n);
      check_shape(*n);
      check_target(*n);
    }
    if (outputs > 1) problem("the graph has {} output nodes; it must have at most one", outputs);
    return problems_;
  }

 private:
  template <typename... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    problems_.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  void check_inputs(const Node& n) {
    for (Node* in : referenced_nodes(n)) {
      auto it = position_.find(in);
      if (it == position_.end()) {
        problem("%{} uses a node that is not in this graph (a dangling reference: erased, or from another graph)", n.name());
      } else if (it->second >= position_.at(&n)) {
        problem("%{} uses %{}, which comes later in the graph (the order must be topological)", n.name(), in->name());
      }
    }
  }

  void check_users(const Node& n) {
    const std::vector<Node*> refs = referenced_nodes(n);
    if (refs != n.all_input_nodes()) problem("%{}: its recorded inputs disagree with its arguments", n.name());
    for (Node* in : refs) {
      if (position_.count(in) && !contains(in->users(), &n))
        problem("%{} uses %{} but is missing from the users of %{}", n.name(), in->name(), in->name());
    }
    std::unordered_set<const Node*> seen;
    for (Node* u : n.users()) {
      if (!seen.insert(u).second) problem("%{} lists the user %{} twice", n.name(), u->name());
      if (!position_.count(u)) {
        problem("%{} lists a user that is not in this graph", n.name());
      } else if (!contains(referenced_nodes(*u), &n)) {
        problem("%{} lists %{} as a user, but %{} does not use it", n.name(), u->name(), u->name());
      }
    }
  }

  void check_shape(const Node& n) {
    switch (n.op()) {
      case NodeOp::Placeholder:
      case NodeOp::GetAttr:
        if (!n.args().empty() || !n.kwargs().empty()) problem("{} %{} must not have arguments", op_name(n.op()), n.name());
        break;
      case NodeOp::Output:
        if (n.args().size() != 1 || !n.kwargs().empty()) problem("the output node %{} must have exactly one argument", n.name());
        break;
      case NodeOp::CallMethod:
        if (n.args().empty() || !n.args()[0].is_node()) problem("call_method %{} needs the tensor `self` as its first argument", n.name());
        break;
      default:
        break;
    }
  }

  void check_target(const Node& n) {
    const std::string& t = n.target();
    switch (n.op()) {
      case NodeOp::CallFunction:
      case NodeOp::CallMethod:
        if (!is_builtin_function(t) && OpRegistry::instance().find(t) == nullptr)
          problem("{} %{} has target '{}', which is not a registered op", op_name(n.op()), n.name(), t);
        break;
      case NodeOp::CallModule:
        if (owner_ && !has_submodule(*owner_, t))
          problem("call_module %{} has target '{}', which is not a submodule of {}", n.name(), t, owner_->type_name());
        break;
      case NodeOp::GetAttr:
        if (owner_ && !has_attribute(*owner_, t))
          problem("get_attr %{} has target '{}', which is not a parameter, buffer or constant of {}", n.name(), t,
                  owner_->type_name());
        break;
      default:
        break;
    }
  }

  const Graph& graph_;
  const nn::Module* owner_;
  std::unordered_map<const Node*, size_t> position_;
  std::vector<std::string> problems_;
};

}  // namespace

void Graph::lint(const nn::Module* owner) const {
  const std::vector<std::string> problems = Linter(*this, owner).run();
  QFLOW_CHECK(problems.empty(), "Graph::lint: {} problem{}: {}", problems.size(), problems.size() == 1 ? "" : "s",
              fmt::join(problems, "; "));
}

}  // namespace qflow::fx
