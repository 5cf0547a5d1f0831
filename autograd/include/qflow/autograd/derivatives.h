#pragma once
// Derivative rules, one per differentiable op, registered beside each other by family in
// autograd/derivatives/<family>.cpp (mirroring core/kernels/<family>.cpp):
//
//   QFLOW_REGISTER_DERIVATIVES(arithmetic) {
//     registry.def("mul", {.node_name = "MulBackward", .save_inputs = kSaveAll,
//                          .backward = [](const BackwardContext& ctx, const TensorList& g) {
//                            return TensorList{g[0] * ctx.input(1), g[0] * ctx.input(0)};
//                          }});
//   }
//
// Inputs are numbered "flat": the tensors of the op's arguments in order, with Tensor[]
// arguments expanded; a None given for a "Tensor?" argument keeps its slot as an undefined
// input (needs_grad false, has_input false), so numbering follows the schema whatever the
// caller passed. A rule returns one gradient per flat input (undefined = none); the engine
// sums gradients that were broadcast back down to the input's shape, so element-wise rules
// may return broadcast-shaped gradients. Backward formulas run with grad mode off.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qflow/core/value.h"
#include "qflow/core/op_registry.h"

namespace qflow::autograd {

struct SavedTensor;

class BackwardContext {
 public:
  /// Saved flat input i (must be in the rule's save_inputs); throws if modified in place.
  const Tensor& input(size_t i) const;
  const std::vector<int64_t>& input_sizes(size_t i) const { return input_meta_.at(i).sizes; }
  DType input_dtype(size_t i) const { return input_meta_.at(i).dtype; }
  size_t num_inputs() const { return input_meta_.size(); }
  /// True when flat input i was saved (it is in save_inputs and was not None/undefined).
  bool has_input(size_t i) const { return i < saved_inputs_.size() && saved_inputs_[i] != nullptr; }
  /// Positional argument of the forward call. Tensor arguments are not kept here.
  const Value& arg(size_t i) const { return args_.at(i); }
  /// Saved output i (requires save_outputs).
  const Tensor& output(size_t i) const;
  const TensorMeta& output_meta(size_t i) const { return output_meta_.at(i); }
  bool needs_grad(size_t i) const { return needs_grad_.at(i); }

 private:
  friend class OpBackward;
  friend class AutogradLayer;
  std::string op_;
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

inline constexpr uint64_t kSaveNone = 0;
inline constexpr uint64_t kSaveAll = ~uint64_t{0};
constexpr uint64_t save_inputs(std::initializer_list<int> idx) {
  uint64_t m = 0;
  for (int i : idx) m |= uint64_t{1} << i;
  return m;
}

struct DerivativeRule {
  std::string node_name;          // "MulBackward"
  uint64_t save_inputs = kSaveNone;
  bool save_outputs = false;
  bool differentiable = true;     // false: outputs never carry history (argmax, eq, ...)
  BackwardFn backward = nullptr;
};

class DerivativeRegistry {
 public:
  static DerivativeRegistry& instance();
  /// Registers the rule of op `full_name` ("add", "max.dim").
  void def(std::string_view full_name, DerivativeRule rule);
  /// Marks ops whose outputs never need gradients.
  void non_differentiable(std::initializer_list<std::string_view> full_names);
  const DerivativeRule* find(std::string_view full_name) const;

 private:
  std::unordered_map<std::string, DerivativeRule> rules_;
};

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
