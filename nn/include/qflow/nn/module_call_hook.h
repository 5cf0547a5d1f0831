#pragma once
// The interception point at module boundaries (what fx's tracer installs).
//
// Note [Module call hook]
// Every module call goes through the non-virtual Module::call (operator() is a thin wrapper
// over it). When a ModuleCallHook is installed on the calling thread, call() hands the module,
// its inputs and a `run_forward` continuation to the hook instead of running forward itself.
// The hook decides per module:
//   - trace through: `return run_forward(inputs);` — forward runs, and the calls it makes to
//     submodules reach the hook again;
//   - leaf: produce the outputs without running forward (fx records a call_module node and
//     returns proxy tensors).
// The hook receives the Module itself, not a name: a tracer builds a Module* -> dotted path
// map once from root.named_modules(), which also handles modules shared between parents.
// The hook is thread-local (installed with ModuleCallHookGuard) so tracing on one thread
// never intercepts modules running on another.
#include <functional>

#include "qflow/core/tensor.h"

namespace qflow::nn {

class Module;

class ModuleCallHook {
 public:
  using Forward = std::function<TensorList(const TensorList&)>;
  virtual ~ModuleCallHook() = default;
  /// Runs one module call; see Note [Module call hook].
  virtual TensorList call(Module& module, const TensorList& inputs, const Forward& run_forward) = 0;
};

/// The hook installed on this thread, or null.
ModuleCallHook* module_call_hook();

/// Installs `hook` on this thread for the guard's lifetime (null uninstalls); restores the
/// previous hook on destruction, so guards nest.
class ModuleCallHookGuard {
 public:
  explicit ModuleCallHookGuard(ModuleCallHook* hook);
  ~ModuleCallHookGuard();
  ModuleCallHookGuard(const ModuleCallHookGuard&) = delete;
  ModuleCallHookGuard& operator=(const ModuleCallHookGuard&) = delete;

 private:
  ModuleCallHook* previous_;
};

}  // namespace qflow::nn
