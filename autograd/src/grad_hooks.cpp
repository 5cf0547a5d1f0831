// Post-accumulate-grad hooks; see Note [Post-accumulate-grad hooks].
#include "qflow/autograd/grad_hooks.h"

#include <algorithm>
#include <atomic>

#include "qflow/autograd/autograd_meta.h"

namespace qflow::autograd {

HookHandle::HookHandle(HookHandle&& other) noexcept : leaf_(std::move(other.leaf_)), id_(other.id_) { other.id_ = 0; }

HookHandle& HookHandle::operator=(HookHandle&& other) noexcept {
  if (this != &other) {
    remove();
    leaf_ = std::move(other.leaf_);
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void HookHandle::remove() {
  if (id_ == 0) return;
  if (AutogradMeta* m = meta_of(leaf_)) {
    auto& hooks = m->post_accumulate_grad_hooks;
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == id_; }), hooks.end());
  }
  id_ = 0;
  leaf_ = Tensor();
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  QFLOW_CHECK(leaf.defined(), "register_post_accumulate_grad_hook: the tensor is undefined");
  AutogradMeta* m = meta_of(leaf);
  QFLOW_CHECK(m != nullptr && m->requires_grad && !m->grad_fn,
              "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad (a parameter), got a tensor "
              "of shape {} that {}", leaf.sizes(), m != nullptr && m->grad_fn ? "is the result of an op" : "does not require grad");
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  m->post_accumulate_grad_hooks.emplace_back(id, std::move(hook));
  return HookHandle(leaf, id);
}

}  // namespace qflow::autograd
