#pragma once
// Argument: one argument of an fx Node. It mirrors core's Value (see value.h) with one
// difference: a tensor is never stored, only the Node that produces it, so a graph is a
// program and not a snapshot of data.
//
//   Value (an op call)          Argument (a graph node)
//   Tensor                      Node*                (the producer: proxy, get_attr, ...)
//   Tensor[]                    NodeList
//   SymInt (symbolic)           Node*                (the node computing the size)
//   SymInt[] ([%sym_size, -1])  IntListArg           (entries: int64 or Node*)
//   Scalar                      int64 | double | bool (by the Scalar's kind)
//   bool, float, str, dtype     bool, double, std::string, DType
//   None                        None
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "qflow/core/dtype.h"

namespace qflow::fx {

class Node;

/// One entry of an int list argument: a constant or the node computing a symbolic size.
using IntOrNode = std::variant<int64_t, Node*>;
using IntListArg = std::vector<IntOrNode>;
/// Tensor[] argument: the nodes producing the tensors, in order.
using NodeList = std::vector<Node*>;

class Argument {
 public:
  using Storage = std::variant<std::monostate, Node*, int64_t, double, bool, std::string, DType, IntListArg, NodeList>;

  Argument() = default;                                       // None
  Argument(std::nullopt_t) {}                                 // NOLINT
  Argument(Node* n) : v_(n) {}                                // NOLINT
  Argument(int v) : v_(static_cast<int64_t>(v)) {}            // NOLINT
  Argument(int64_t v) : v_(v) {}                              // NOLINT
  Argument(double v) : v_(v) {}                               // NOLINT
  Argument(bool v) : v_(v) {}                                 // NOLINT
  Argument(std::string v) : v_(std::move(v)) {}               // NOLINT
  Argument(const char* v) : v_(std::string(v)) {}             // NOLINT
  Argument(DType v) : v_(v) {}                                // NOLINT
  Argument(IntListArg v) : v_(std::move(v)) {}                   // NOLINT
  Argument(NodeList v) : v_(std::move(v)) {}                  // NOLINT
  Argument(const std::vector<int64_t>& v) : v_(IntListArg(v.begin(), v.end())) {}  // NOLINT

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_node() const { return std::holds_alternative<Node*>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_dtype() const { return std::holds_alternative<DType>(v_); }
  bool is_int_list() const { return std::holds_alternative<IntListArg>(v_); }
  bool is_node_list() const { return std::holds_alternative<NodeList>(v_); }

  /// Typed accessors; each throws qflow::Error naming both kinds on a mismatch.
  Node* node() const;
  int64_t to_int() const;
  double to_double() const;  // ints convert
  bool to_bool() const;
  const std::string& string() const;
  DType dtype() const;
  const IntListArg& int_list() const;
  const NodeList& node_list() const;

  /// "None", "Node", "int", "float", "bool", "str", "ScalarType", "int[]", "Node[]".
  std::string_view kind_name() const;
  const Storage& storage() const { return v_; }
  Storage& storage() { return v_; }

  bool operator==(const Argument& o) const { return v_ == o.v_; }

 private:
  Storage v_;
};

using Arguments = std::vector<Argument>;
/// Keyword arguments in insertion order (printing and code generation keep it).
using Kwargs = std::vector<std::pair<std::string, Argument>>;

/// Calls `fn` for every Node referenced by `arg` (a list's nodes in order; repeats included).
void for_each_node(const Argument& arg, const std::function<void(Node*)>& fn);
/// A copy of `arg` with every referenced Node replaced by fn(node).
Argument map_nodes(const Argument& arg, const std::function<Node*(Node*)>& fn);

/// torch.fx's rendering: %name for nodes, (a,) tuples, [1, %s] lists, True/False/None,
/// Python float repr (2.0, 1e-05), quoted strings, dtype names.
std::string format_argument(const Argument& arg);
/// "(%x, 1)" — a tuple of arguments, with the trailing comma of a one-element tuple.
std::string format_arguments(const Arguments& args);
/// "{alpha: 2}".
std::string format_kwargs(const Kwargs& kwargs);
/// Python float repr of a double: integral values keep ".0".
std::string format_double(double v);

}  // namespace qflow::fx
