#include "qflow/fx/argument.h"

#include <cmath>

#include "qflow/core/error.h"
#include "qflow/fx/node.h"

namespace qflow::fx {

namespace {
template <typename T>
const T& get_or_throw(const Argument& a, std::string_view want) {
  const T* p = std::get_if<T>(&a.storage());
  QFLOW_CHECK(p != nullptr, "fx argument: expected {}, got {}", want, a.kind_name());
  return *p;
}
}  // namespace

Node* Argument::node() const { return get_or_throw<Node*>(*this, "Node"); }
int64_t Argument::to_int() const { return get_or_throw<int64_t>(*this, "int"); }
double Argument::to_double() const {
  if (const auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  return get_or_throw<double>(*this, "float");
}
bool Argument::to_bool() const { return get_or_throw<bool>(*this, "bool"); }
const std::string& Argument::string() const { return get_or_throw<std::string>(*this, "str"); }
DType Argument::dtype() const { return get_or_throw<DType>(*this, "ScalarType"); }
const IntListArg& Argument::int_list() const { return get_or_throw<IntListArg>(*this, "int[]"); }
const NodeList& Argument::node_list() const { return get_or_throw<NodeList>(*this, "Node[]"); }

std::string_view Argument::kind_name() const {
  static constexpr std::string_view kNames[] = {"None", "Node", "int", "float", "bool", "str", "ScalarType", "int[]", "Node[]"};
  return kNames[v_.index()];
}

void for_each_node(const Argument& arg, const std::function<void(Node*)>& fn) {
  if (arg.is_node()) {
    fn(arg.node());
  } else if (arg.is_node_list()) {
    for (Node* n : arg.node_list()) fn(n);
  } else if (arg.is_int_list()) {
    for (const IntOrNode& e : arg.int_list())
      if (const auto* n = std::get_if<Node*>(&e)) fn(*n);
  }
}

Argument map_nodes(const Argument& arg, const std::function<Node*(Node*)>& fn) {
  if (arg.is_node()) return Argument(fn(arg.node()));
  if (arg.is_node_list()) {
    NodeList out;
    for (Node* n : arg.node_list()) out.push_back(fn(n));
    return Argument(std::move(out));
  }
  if (arg.is_int_list()) {
    IntListArg out;
    for (const IntOrNode& e : arg.int_list()) {
      if (const auto* n = std::get_if<Node*>(&e)) out.emplace_back(fn(*n));
      else out.push_back(e);
    }
    return Argument(std::move(out));
  }
  return arg;
}

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip form, like Python's repr
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_argument(const Argument& arg) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(Node* n) const { return n ? "%" + n->name() : "%<null>"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return format_double(v); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(DType d) const { return std::string(dtype_name(d)); }
    std::string operator()(const IntListArg& l) const {
      std::vector<std::string> parts;
      for (const IntOrNode& e : l) parts.push_back(std::visit([this](auto x) { return (*this)(x); }, e));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
    std::string operator()(const NodeList& l) const {
      std::vector<std::string> parts;
      for (Node* n : l) parts.push_back((*this)(n));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
  };
  return std::visit(Visitor{}, arg.storage());
}

std::string format_arguments(const Arguments& args) {
  std::vector<std::string> parts;
  for (const Argument& a : args) parts.push_back(format_argument(a));
  if (parts.size() == 1) return "(" + parts[0] + ",)";
  return fmt::format("({})", fmt::join(parts, ", "));
}

std::string format_kwargs(const Kwargs& kwargs) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : kwargs) parts.push_back(k + ": " + format_argument(v));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

}  // namespace qflow::fx
