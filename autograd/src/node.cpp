#include "qflow/autograd/node.h"

#include <atomic>

#include "qflow/autograd/anomaly_mode.h"
#include "qflow/autograd/autograd_meta.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};

// Note [Iterative graph teardown]
// Dropping the last reference to a long chain of nodes would destroy it recursively, one
// stack frame per node. Instead, a dying node hands its children to a per-thread list that
// the outermost destructor drains in a loop.
thread_local bool t_draining = false;
thread_local std::vector<std::shared_ptr<Node>> t_pending;
}  // namespace

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  if (is_anomaly_enabled()) anomaly_scope_ = current_anomaly_scope();
}

Node::~Node() {
  for (Edge& e : next_edges_)
    if (e.node) t_pending.push_back(std::move(e.node));
  if (t_draining) return;
  t_draining = true;
  while (!t_pending.empty()) {
    std::shared_ptr<Node> n = std::move(t_pending.back());
    t_pending.pop_back();
    n.reset();  // may run ~Node, which appends to t_pending
  }
  t_draining = false;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads.at(0));
  if (!g.defined()) return {};
  AutogradMeta& meta = ensure_meta(leaf_);
  if (!meta.grad.defined()) {
    // Keep our own dense copy unless the gradient is an unshared contiguous buffer:
    // a broadcast view or a tensor someone else holds must not become .grad.
    const bool owned = g.is_contiguous() && g.impl_ptr().use_count() == 1 && !g.impl()->is_view();
    meta.grad = owned ? g.detach() : g.detach().clone();
  } else {
    NoGradGuard no_grad;
    meta.grad.add_(g);
  }
  // Copied: a hook may register or remove hooks (Note [Post-accumulate-grad hooks]).
  if (!meta.post_accumulate_grad_hooks.empty()) {
    const auto hooks = meta.post_accumulate_grad_hooks;
    for (const auto& [id, hook] : hooks) hook(leaf_);
  }
  return {};
}

}  // namespace qflow::autograd
