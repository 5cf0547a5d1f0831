#pragma once
// Derivative rules, one per differentiable op, written beside each other by family in
// autograd/derivatives/<family>.cpp (mirroring core/ops/<family>.toml). The op's declaration
// says what autograd does with it (Note [One declaration per op]):
//
//   [mul]                                    # core/ops/arithmetic.toml
//   derivative = { node = "MulBackward", rule = "mul_backward", save = "all" }
//   [eq]
//   non_differentiable = "boolean outputs"
//
// and the family's file defines the rule and ends with the registrations gen-ops writes
// (`#include "autograd/derivatives/arithmetic.derivatives.inc"`, which makes the
// registry.def / non_differentiable / no_derivative calls of DerivativeRegistry below):
//
//   TensorList mul_backward(const BackwardContext& ctx, const TensorList& g) {
//     return ctx.gradients({{"self", g[0] * ctx.input("other")}, {"other", g[0] * ctx.input("self")}});
//   }
//
// Note [Derivatives read arguments by name]
// A rule names the forward op's arguments as its schema does (`ctx.arg("ceil_mode")`,
// `ctx.input("weight")`, `save_inputs({"input", "weight"})`), so the schema string stays the
// one place that fixes the argument order. Names are resolved against the op's schema once
// per rule, on the first recorded call (static initialisers of different layers run in no
// fixed order, so the op may not be registered yet when the rule is); after that a lookup is
// a scan of the op's few argument names, and the flat input index of each tensor argument is
// precomputed. A name the schema does not have throws qflow::Error naming the op, the name
// and the schema's arguments (tests/onnx/op_coverage_test.cpp resolves every rule's saved
// names up front, so a misspelt save fails there rather than at someone's first backward).
//
// Inputs are numbered "flat": the tensors of the op's arguments in order, with Tensor[]
// arguments expanded; a None given for a "Tensor?" argument keeps its slot as an undefined
// input (needs_grad false, has_input false), so numbering follows the schema whatever the
// caller passed. A rule returns one gradient per flat input (undefined = none), built by
// name with ctx.gradients() (an op with a single tensor argument may return just `{grad}`;
// cat and stack, whose only tensor argument is a Tensor[], return one per tensor of the
// list, read with list_size / input_sizes(name, k) / needs_grad(name, k)); the engine sums gradients that were broadcast back down to the
// input's shape, so element-wise rules may return broadcast-shaped gradients. Backward
// formulas run with grad mode off.
//
// Every registered op has a rule or a declaration (gen-ops at build time, and the op-coverage
// test at run time, check it):
// non_differentiable() for ops whose outputs never carry a gradient (integer and boolean
// results, random draws) — they run under autograd and their outputs have no history — and
// no_derivative() for ops that have none in qflow (the backward ops: no double backward;
// the integer kernels of deployed layers), which autograd refuses with the declared reason.
// Two kinds need neither: ops without a tensor argument (factories; autograd never records
// them) and in-place ops, differentiated through their out-of-place twin (inplace_twin,
// Note [In-place ops under autograd]) unless they are declared themselves.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qflow/core/value.h"
#include "qflow/core/op_registry.h"

namespace qflow::autograd {

struct SavedTensor;

/// The tensors a rule keeps for backward: all of them, or the named tensor arguments. A
/// literal type, so that kSaveAll and friends are constants: rules are registered from static
/// initialisers of other files, which must not see them unconstructed.
struct SaveInputs {
  static constexpr size_t kMaxNames = 8;
  bool all = false;
  std::array<std::string_view, kMaxNames> names{};
  size_t count = 0;
};
inline constexpr SaveInputs kSaveNone{};
inline constexpr SaveInputs kSaveAll{.all = true};
/// The named tensor (or Tensor[]) arguments: `save_inputs({"input", "weight"})`.
constexpr SaveInputs save_inputs(std::initializer_list<std::string_view> names) {
  if (names.size() > SaveInputs::kMaxNames) throw std::length_error("save_inputs: more names than SaveInputs holds");
  SaveInputs s;
  for (std::string_view n : names) s.names[s.count++] = n;
  return s;
}

/// The reason every backward op (conv2d_backward, softmax_backward, ...) gives in no_derivative.
inline constexpr std::string_view kNoDoubleBackward =
    "a backward op: qflow does not differentiate derivatives (no double backward)";

namespace detail {
/// One argument of a rule's op, resolved from its schema.
struct ArgSlot {
  std::string_view name{};
  size_t index = 0;             // position in the schema
  ArgType type = ArgType::Tensor;
  std::optional<size_t> flat{};  // flat input index of a Tensor argument not preceded by a Tensor[]
  bool saved = false;
};

/// A rule's op schema with every argument's slot; built once per rule (Note [Derivatives
/// read arguments by name]).
class RuleSignature {
 public:
  /// Resolves against `schema`; throws when a saved name is not one of its tensor arguments.
  void resolve(const OpSchema& schema, const SaveInputs& save);
  bool resolved() const { return schema_ != nullptr; }
  /// The slot named `name`; throws qflow::Error naming the op, the name and the schema's arguments.
  const ArgSlot& slot(std::string_view name) const;
  const std::vector<ArgSlot>& slots() const { return slots_; }
  const OpSchema& schema() const { return *schema_; }
  /// True when some argument is a Tensor[] (flat indices then depend on the call).
  bool has_tensor_list() const { return has_tensor_list_; }

  std::once_flag once;

 private:
  const OpSchema* schema_ = nullptr;
  std::vector<ArgSlot> slots_;
  bool has_tensor_list_ = false;
};
}  // namespace detail

class BackwardContext {
 public:
  /// The saved tensor argument `name` (must be in the rule's save_inputs); throws if it was
  /// modified in place since.
  const Tensor& input(std::string_view name) const;
  /// True when tensor argument `name` was saved (in save_inputs, and not None).
  bool has_input(std::string_view name) const { return has_input_at(flat_index(name)); }
  /// The saved tensor argument `name`, or an undefined tensor when it was None.
  Tensor input_or_none(std::string_view name) const;
  const std::vector<int64_t>& input_sizes(std::string_view name) const { return input_meta_.at(flat_index(name)).sizes; }
  DType input_dtype(std::string_view name) const { return input_meta_.at(flat_index(name)).dtype; }
  Device input_device(std::string_view name) const { return input_meta_.at(flat_index(name)).device; }
  /// True when tensor argument `name` requires grad (false for None).
  bool needs_grad(std::string_view name) const { return needs_grad_.at(flat_index(name)); }

  /// Tensor[] argument `name`: its length, and its k-th tensor's sizes and needs_grad.
  size_t list_size(std::string_view name) const;
  const std::vector<int64_t>& input_sizes(std::string_view name, size_t k) const {
    return input_meta_.at(list_index(name, k)).sizes;
  }
  bool needs_grad(std::string_view name, size_t k) const { return needs_grad_.at(list_index(name, k)); }

  /// The non-tensor argument `name` of the forward call (tensors are kept only as saved inputs).
  const Value& arg(std::string_view name) const;

  /// Saved output i (requires save_outputs).
  const Tensor& output(size_t i) const;
  const TensorMeta& output_meta(size_t i) const { return output_meta_.at(i); }

  /// One gradient per flat input, from gradients of tensor arguments given by name (the
  /// others undefined): what a rule returns.
  TensorList gradients(std::initializer_list<std::pair<std::string_view, Tensor>> by_name) const;

 private:
  friend class OpBackward;
  friend class AutogradLayer;
  size_t flat_index(std::string_view name) const;
  size_t list_index(std::string_view name, size_t k) const;
  const Tensor& input_at(size_t i) const;
  bool has_input_at(size_t i) const { return i < saved_inputs_.size() && saved_inputs_[i] != nullptr; }

  std::string op_;
  const detail::RuleSignature* signature_ = nullptr;
  /// First flat input of each argument; filled only for ops with a Tensor[] argument.
  std::vector<uint32_t> first_input_;
  Stack args_;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<bool> needs_grad_;
  mutable std::vector<Tensor> unpacked_inputs_;
  mutable std::vector<Tensor> unpacked_outputs_;
  std::vector<std::shared_ptr<SavedTensor>> saved_inputs_;
  std::vector<std::shared_ptr<SavedTensor>> saved_outputs_;
};

using BackwardFn = TensorList (*)(const BackwardContext& ctx, const TensorList& grads);

/// What autograd does with an op.
enum class Differentiability : uint8_t {
  Differentiable,     // a backward rule
  NonDifferentiable,  // outputs never carry a gradient (argmax, eq, rand_like, ...)
  NoDerivative,       // refused on tensors that require grad (backward ops: no double backward)
};

struct DerivativeRule {
  std::string node_name;  // "MulBackward"
  SaveInputs save_inputs = kSaveNone;
  bool save_outputs = false;
  Differentiability kind = Differentiability::Differentiable;
  /// Why a declared op has no rule (set by non_differentiable / no_derivative).
  std::string reason{};
  /// Set by DerivativeRegistry::def.
  std::string op{};
  std::shared_ptr<detail::RuleSignature> signature{};
  BackwardFn backward = nullptr;  // last: every rule's designated initializer ends with it

  bool differentiable() const { return kind == Differentiability::Differentiable; }
  /// The rule's argument slots, resolved against its op's schema on first use.
  const detail::RuleSignature& resolved() const;
};

class DerivativeRegistry {
 public:
  static DerivativeRegistry& instance();
  /// Registers the rule of op `full_name` ("add", "max.dim").
  void def(std::string_view full_name, DerivativeRule rule);
  /// Declares ops whose outputs never carry a gradient; `reason` says why ("boolean outputs").
  void non_differentiable(std::initializer_list<std::string_view> full_names, std::string_view reason);
  /// Declares ops without a derivative in qflow; autograd refuses them, quoting `reason`.
  void no_derivative(std::initializer_list<std::string_view> full_names, std::string_view reason);
  /// The declaration without a stated reason (fx/src/sym_ops.cpp's sym_size still makes it).
  void non_differentiable(std::initializer_list<std::string_view> full_names) {
    non_differentiable(full_names, "its outputs carry no gradient");
  }
  const DerivativeRule* find(std::string_view full_name) const;
  /// Every rule and declaration, by op name.
  std::vector<const DerivativeRule*> all() const;

 private:
  void declare(std::initializer_list<std::string_view> full_names, Differentiability kind, std::string_view reason);
  std::unordered_map<std::string, DerivativeRule> rules_;
};

/// The out-of-place twin through which autograd differentiates in-place op `schema`
/// ("add_.Scalar" -> "add.Scalar"; Note [In-place ops under autograd]), or "" for copy_,
/// fill_ and zero_, which it differentiates itself. For an in-place op without a rule or
/// declaration of its own.
std::string inplace_twin(const OpSchema& schema);

namespace detail {
struct DerivativeRegistrar {
  explicit DerivativeRegistrar(void (*fn)(DerivativeRegistry&)) { fn(DerivativeRegistry::instance()); }
};
}  // namespace detail

}  // namespace qflow::autograd

#define QFLOW_REGISTER_DERIVATIVES(family)                                                        \
  static void QFLOW_CONCAT(qflow_register_derivatives_, family)(::qflow::autograd::DerivativeRegistry &); \
  static ::qflow::autograd::detail::DerivativeRegistrar QFLOW_CONCAT(qflow_derivative_registrar_, family){ \
      &QFLOW_CONCAT(qflow_register_derivatives_, family)};                                          \
  static void QFLOW_CONCAT(qflow_register_derivatives_, family)([[maybe_unused]] ::qflow::autograd::DerivativeRegistry & registry)
