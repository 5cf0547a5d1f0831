#pragma once
// Op schemas in PyTorch's notation, parsed from a string at registration:
//   "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
//   "add_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
//   "view(Tensor(a) self, SymInt[] size) -> Tensor(a)"
//   "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
// Types: Tensor, Tensor?, Tensor[], Scalar, Scalar?, int, int?, SymInt, int[], SymInt[],
// int[]?, bool, float, float?, str, ScalarType, ScalarType?. "(a)" marks a view of the
// argument, "(a!)" an argument the op writes to.
#include <optional>
#include <string>
#include <vector>

#include "qflow/core/value.h"

namespace qflow {

enum class ArgType : uint8_t { Tensor, TensorList, Scalar, Int, IntList, Bool, Float, String, DType };

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::Tensor;
  bool optional = false;     // "T?": accepts None
  bool keyword_only = false; // after "*"
  std::optional<char> alias; // "(a)": set when the argument is aliased by an output
  bool is_write = false;     // "(a!)"
  std::optional<Value> default_value;
};

struct OpSchema {
  std::string name;      // "max"
  std::string overload;  // "dim" (empty for the default overload)
  std::vector<ArgSpec> args;
  std::vector<ArgSpec> returns;

  /// "max.dim" or "max".
  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
  /// Index of the first argument an op writes to, if any (in-place ops).
  std::optional<size_t> mutated_arg() const;
  /// True when output 0 is a view of an argument.
  bool returns_view() const;
  /// Index of an argument by name.
  std::optional<size_t> arg_index(std::string_view name) const;
  /// The schema string it was parsed from (normalised).
  std::string to_string() const;
};

/// Parses a schema string; throws qflow::Error naming the text and position on bad syntax.
OpSchema parse_schema(std::string_view text);

std::string_view arg_type_name(ArgType t);

/// Checks that `args` fit the schema (count, kinds, None only where optional) and fills in
/// defaults for trailing omitted arguments. Throws qflow::Error naming the op and argument.
void normalize_args(const OpSchema& schema, Stack& args);

}  // namespace qflow
