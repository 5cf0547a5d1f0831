#pragma once
// Hooks that run when a leaf's .grad has been written by backward.
//
// Note [Post-accumulate-grad hooks]
// Data-parallel training (distributed::DistributedDataParallel) must know the moment each
// parameter's gradient is final, to start communicating it while backward still computes the
// rest. The engine runs a leaf's AccumulateGrad once per backward, after every path into the
// leaf has been summed, so the hook runs exactly then, with .grad complete (as PyTorch's
// register_post_accumulate_grad_hook). Hooks run on the thread running backward, in the order
// they were registered; an exception from a hook stops backward like one from any node.
#include <cstdint>
#include <functional>

#include "qflow/core/tensor.h"

namespace qflow::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Removes its hook when destroyed (or on remove()); movable, not copyable.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(Tensor leaf, uint64_t id) : leaf_(std::move(leaf)), id_(id) {}
  HookHandle(HookHandle&& other) noexcept;
  HookHandle& operator=(HookHandle&& other) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { remove(); }
  void remove();

 private:
  Tensor leaf_;
  uint64_t id_ = 0;
};

/// Runs `hook(leaf)` each time backward has accumulated a gradient into `leaf`'s .grad.
/// `leaf` must be a leaf tensor that requires grad.
[[nodiscard]] HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);

}  // namespace qflow::autograd
