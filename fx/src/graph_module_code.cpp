// GraphModule::code(): the graph as straight-line Python-like code, one line per node.
#include <algorithm>

#include "qflow/fx/graph_module.h"

namespace qflow::fx {

namespace {

std::string code_of(const Argument& a);

std::string code_of_items(const std::vector<std::string>& items) { return fmt::format("{}", fmt::join(items, ", ")); }

std::string code_of(const Argument& a) {
  if (a.is_node()) return a.node()->name();
  if (a.is_string()) return fmt::format("'{}'", a.string());
  if (a.is_dtype()) return fmt::format("qflow.{}", dtype_name(a.dtype()));
  if (a.is_node_list()) {
    std::vector<std::string> items;
    for (Node* n : a.node_list()) items.push_back(n->name());
    return fmt::format("[{}]", code_of_items(items));
  }
  if (a.is_int_list()) {
    std::vector<std::string> items;
    for (const IntOrNode& e : a.int_list())
      items.push_back(std::holds_alternative<Node*>(e) ? std::get<Node*>(e)->name() : std::to_string(std::get<int64_t>(e)));
    return fmt::format("[{}]", code_of_items(items));
  }
  return format_argument(a);  // None, True, 2, 0.5
}

// "a, b, alpha=2" from args[first:] and the kwargs.
std::string call_arguments(const Node& n, size_t first = 0) {
  std::vector<std::string> items;
  for (size_t i = first; i < n.args().size(); ++i) items.push_back(code_of(n.args()[i]));
  for (const auto& [k, v] : n.kwargs()) items.push_back(k + "=" + code_of(v));
  return code_of_items(items);
}

// "layer1.0.conv1" → "self.layer1[0].conv1", as Python spells indexing into a Sequential.
std::string attribute_path(const std::string& path) {
  std::string out = "self";
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    out += index ? "[" + part + "]" : "." + part;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::string line_of(const Node& n) {
  switch (n.op()) {
    case NodeOp::Placeholder:
      return "";
    case NodeOp::GetAttr:
      return n.name() + " = " + attribute_path(n.target());
    case NodeOp::CallModule:
      return n.name() + " = " + attribute_path(n.target()) + "(" + call_arguments(n) + ")";
    case NodeOp::CallMethod:
      return n.name() + " = " + code_of(n.args().at(0)) + "." + n.target() + "(" + call_arguments(n, 1) + ")";
    case NodeOp::CallFunction:
      if (n.target() == "getitem" && n.args().size() == 2) return n.name() + " = " + code_of(n.args()[0]) + "[" + code_of(n.args()[1]) + "]";
      return n.name() + " = qflow." + n.target() + "(" + call_arguments(n) + ")";
    case NodeOp::Output: {
      if (n.args().empty()) return "return None";
      const Argument& r = n.args()[0];
      if (r.is_node_list()) {
        std::vector<std::string> names;
        for (Node* x : r.node_list()) names.push_back(x->name());
        return "return (" + code_of_items(names) + (names.size() == 1 ? ",)" : ")");
      }
      return "return " + code_of(r);
    }
  }
  return "";
}

}  // namespace

std::string GraphModule::code() const {
  std::vector<std::string> inputs{"self"};
  for (const Node* p : graph_->placeholders()) inputs.push_back(p->name());
  std::string s = "def forward(" + code_of_items(inputs) + "):\n";
  for (const Node* n : *graph_) {
    const std::string line = line_of(*n);
    if (!line.empty()) s += "    " + line + "\n";
  }
  return s;
}

}  // namespace qflow::fx
