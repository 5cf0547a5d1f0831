#pragma once
// Arguments of an op call read by name through the op's schema.
//
// Note [Arguments by name]
// The schema string is the one place an op's argument order is written down. Kernels and
// shape rules see their arguments through an OpArgs, a view over (schema, stack) that the
// dispatcher builds from the OpDef:
//
//   Stack max_pool2d_kernel(OpArgs& a) {
//     const Tensor& x = a.tensor("self");
//     const IntList kernel = a.int_list("kernel_size");
//     const bool ceil = a["ceil_mode"].to_bool();
//
// A name is looked up by a linear scan of the schema's argument names (at most a dozen, and
// a kernel reads a handful), comparing lengths first: a few nanoseconds against kernels that
// take microseconds, and nothing to build or cache per op. It does not show on the paths
// with the smallest kernels: `qflow-bench-e2e --workload infer|deploy --batch 1 --threads 1`,
// five interleaved runs each of the positional and the by-name build, median of the medians,
// ResNet18 b1 float 22.64 ms before and after, integer 6.89 vs 6.88 ms. A misspelt name throws a
// qflow::Error naming the op and listing the schema's arguments; it can never read the
// wrong slot. `has(name)` lets one kernel serve overloads that differ by an argument
// (add has alpha, mul does not).
//
// A shape rule gets `const OpArgs&`: tracers call shape rules on stacks they own as
// const, so OpArgs::reading wraps a const stack in a view whose only accessors are const.
//
// Results stay positional: a Stack of returns in the order the schema lists them, the same
// way a caller unpacks them. The typed wrappers (qflow::add, qflow::conv2d, ...) name their
// arguments too: `call_tensor(op, {{"self", a}, {"other", b}, {"alpha", alpha}})`. The names
// are compared with the schema once per OpHandle, at the first call (a mismatch is an error
// naming the op, the wrapper's names and the schema's); later calls pass the values by
// position at no extra cost. A kernel that reuses another op's kernel builds that op's
// arguments by name too, with named_stack.
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "qflow/core/schema.h"

namespace qflow {

/// One argument of a call, named as in the op's schema: {"self", x}.
struct NamedArg {
  std::string_view name;
  Value value;
};
using NamedArgs = std::initializer_list<NamedArg>;

/// The stack (in schema order) of a call to `schema`'s op given its arguments by name, in any
/// order: one kernel reusing another op's kernel builds its arguments so. An argument not
/// named takes its default, or None when optional. Throws qflow::Error naming the op for an
/// unknown or repeated name and for a missing required argument.
Stack named_stack(const OpSchema& schema, NamedArgs args);

class OpArgs {
 public:
  OpArgs(const OpSchema& schema, Stack& stack) : schema_(&schema), stack_(&stack) {}
  /// A read-only view over a const stack (shape rules): every accessor of a const OpArgs is const.
  static const OpArgs reading(const OpSchema& schema, const Stack& stack) {
    return OpArgs(schema, const_cast<Stack&>(stack));  // NOLINT: only const accessors reach it
  }

  /// The argument called `name`. A trailing argument the caller left out reads as its
  /// schema default. Throws qflow::Error for a name the schema does not declare.
  const Value& operator[](std::string_view name) const {
    const size_t i = index_of(name);
    return i < stack_->size() ? (*stack_)[i] : default_of(i);
  }
  /// Writable access (in-place kernels); the argument must have been passed.
  Value& operator[](std::string_view name) {
    const size_t i = index_of(name);
    if (i >= stack_->size()) [[unlikely]] not_passed(i);
    return (*stack_)[i];
  }

  /// True when the schema declares an argument `name`.
  bool has(std::string_view name) const { return find(name) < schema_->args.size(); }
  /// True when argument `name` holds None.
  bool is_none(std::string_view name) const { return (*this)[name].is_none(); }

  const Tensor& tensor(std::string_view name) const { return (*this)[name].tensor(); }
  Tensor& tensor(std::string_view name) { return (*this)[name].tensor(); }
  const TensorList& tensor_list(std::string_view name) const { return (*this)[name].tensor_list(); }
  IntList int_list(std::string_view name) const { return (*this)[name].int_list(); }
  int64_t to_int(std::string_view name) const { return (*this)[name].to_int(); }
  bool to_bool(std::string_view name) const { return (*this)[name].to_bool(); }
  double to_double(std::string_view name) const { return (*this)[name].to_double(); }
  Scalar scalar(std::string_view name) const { return (*this)[name].scalar(); }
  DType dtype(std::string_view name) const { return (*this)[name].dtype(); }
  const std::string& string(std::string_view name) const { return (*this)[name].string(); }
  std::optional<Tensor> optional_tensor(std::string_view name) const { return (*this)[name].optional_tensor(); }
  std::optional<Scalar> optional_scalar(std::string_view name) const { return (*this)[name].optional_scalar(); }
  std::optional<int64_t> optional_int(std::string_view name) const { return (*this)[name].optional_int(); }
  std::optional<DType> optional_dtype(std::string_view name) const { return (*this)[name].optional_dtype(); }

  const OpSchema& schema() const { return *schema_; }
  /// "max.dim": for error messages.
  std::string op_name() const { return schema_->full_name(); }
  /// Every argument in schema order, for code that treats all arguments alike (collecting
  /// dispatch keys, converting every opaque tensor), never to pick one out by position.
  const Stack& stack() const { return *stack_; }
  Stack& stack() { return *stack_; }

 private:
  size_t find(std::string_view name) const {
    const auto& args = schema_->args;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].name == name) return i;
    return args.size();
  }
  size_t index_of(std::string_view name) const {
    const size_t i = find(name);
    if (i == schema_->args.size()) [[unlikely]] unknown(name);
    return i;
  }
  const Value& default_of(size_t i) const;
  [[noreturn]] void unknown(std::string_view name) const;
  [[noreturn]] void not_passed(size_t i) const;

  const OpSchema* schema_;
  Stack* stack_;
};

}  // namespace qflow
