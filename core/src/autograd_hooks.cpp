#include "qflow/core/autograd_hooks.h"

#include <atomic>

#include "qflow/core/error.h"

namespace qflow {

namespace {
std::atomic<const AutogradHooks*> g_hooks{nullptr};
}

void set_autograd_hooks(const AutogradHooks* hooks) { g_hooks.store(hooks); }

const AutogradHooks* autograd_hooks_or_null() { return g_hooks.load(); }

const AutogradHooks& autograd_hooks() {
  const AutogradHooks* h = g_hooks.load();
  QFLOW_CHECK(h != nullptr, "autograd is not available: link qflow_autograd (qflow::qflow) to use requires_grad/backward");
  return *h;
}

}  // namespace qflow
