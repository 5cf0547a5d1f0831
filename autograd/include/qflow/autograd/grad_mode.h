#pragma once
// Grad mode: whether ops record history. NoGradGuard turns recording off on this thread by
// excluding the autograd dispatch key (see Note [Dispatch layers]).
#include "qflow/core/dispatch.h"

namespace qflow::autograd {

/// The autograd layer's dispatch key (defined with the others in core's dispatch_key.h).
using ::qflow::kAutogradKey;

struct GradMode {
  static bool is_enabled() { return !Dispatcher::excluded().has(kAutogradKey); }
};

/// Disables gradient recording for its lifetime.
class NoGradGuard {
 public:
  NoGradGuard() : guard_(kAutogradKey) {}

 private:
  ExcludeKeyGuard guard_;
};

/// Re-enables gradient recording inside a NoGradGuard scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : saved_(Dispatcher::excluded()) { Dispatcher::set_excluded(saved_.remove(kAutogradKey)); }
  ~EnableGradGuard() { Dispatcher::set_excluded(saved_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

}  // namespace qflow::autograd

namespace qflow {
using autograd::EnableGradGuard;
using autograd::NoGradGuard;
}  // namespace qflow
