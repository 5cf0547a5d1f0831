#pragma once
// The autograd state of one tensor, stored in TensorImpl's autograd slot.
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "qflow/autograd/node.h"
#include "qflow/core/tensor_impl.h"

namespace qflow::autograd {

struct AutogradMeta final : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;       // null for leaves
  uint32_t output_nr = 0;              // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;  // leaves: their AccumulateGrad, created on demand
  // Leaves: run after AccumulateGrad wrote .grad, with their registration ids
  // (Note [Post-accumulate-grad hooks], grad_hooks.h).
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate_grad_hooks;
};

/// The tensor's meta, or null.
AutogradMeta* meta_of(const Tensor& t);
/// The tensor's meta, created if missing.
AutogradMeta& ensure_meta(const Tensor& t);
/// The edge a gradient for `t` flows into (grad_fn or the leaf's accumulator); invalid when
/// `t` does not require grad.
Edge gradient_edge(const Tensor& t);
/// Makes `t` the output `output_nr` of `fn`.
void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr);

}  // namespace qflow::autograd
