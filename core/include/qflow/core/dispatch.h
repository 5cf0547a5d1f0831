#pragma once
// The dispatcher: every op call walks the active dispatch layers, then the kernel.
//
// Note [Dispatch layers]
// A call collects the dispatch keys of its tensor arguments (each TensorImpl carries a key
// set), removes the thread-locally excluded keys (NoGradGuard excludes autograd), and hands
// the call to the layer with the highest key. A layer does its work and passes the call on
// with `Dispatcher::redispatch(op, args, remaining)`; when no key is left the kernel runs.
// Core knows no layer by name: autograd and fx register theirs at start-up with a priority
// (their key), e.g. tracing (fx) above autograd, so a proxy is recorded, not computed.
#include <memory>
#include <string_view>

#include "qflow/core/dispatch_key.h"
#include "qflow/core/op_registry.h"

namespace qflow {

class DispatchLayer {
 public:
  virtual ~DispatchLayer() = default;
  virtual std::string_view name() const = 0;
  /// Handles a call. `remaining` holds the keys below this layer still to visit.
  virtual Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) = 0;
};

class Dispatcher {
 public:
  /// Registers `layer` under `key` (its priority). Throws if the key is taken.
  static void register_layer(DispatchKey key, std::shared_ptr<DispatchLayer> layer);
  static void unregister_layer(DispatchKey key);
  static DispatchLayer* layer(DispatchKey key);

  /// Calls `op` with `args` (already in schema order, no defaults missing).
  static Stack call(const OpDef& op, Stack args);
  /// Continues a call below the calling layer.
  static Stack redispatch(const OpDef& op, Stack& args, DispatchKeySet remaining);
  /// Union of the dispatch keys of the tensors in `args`.
  static DispatchKeySet keys_of(const Stack& args);

  /// Keys excluded on this thread (see ExcludeKeyGuard).
  static DispatchKeySet excluded();
  static void set_excluded(DispatchKeySet keys);
  /// Keys every call on this thread visits whatever its tensors carry (see IncludeKeyGuard),
  /// unless excluded: a layer that must see every op, backward ops included, such as a recorder.
  static DispatchKeySet included();
  static void set_included(DispatchKeySet keys);
};

/// Includes a key in every call on this thread for the guard's lifetime.
class IncludeKeyGuard {
 public:
  explicit IncludeKeyGuard(DispatchKey key);
  ~IncludeKeyGuard();
  IncludeKeyGuard(const IncludeKeyGuard&) = delete;
  IncludeKeyGuard& operator=(const IncludeKeyGuard&) = delete;

 private:
  DispatchKeySet previous_;
};

/// Excludes a key on this thread for the guard's lifetime (NoGradGuard is one).
class ExcludeKeyGuard {
 public:
  explicit ExcludeKeyGuard(DispatchKey key);
  ~ExcludeKeyGuard();
  ExcludeKeyGuard(const ExcludeKeyGuard&) = delete;
  ExcludeKeyGuard& operator=(const ExcludeKeyGuard&) = delete;

 private:
  DispatchKeySet previous_;
};

/// Calls an op by name with arguments by position, filling defaults:
///   call_op("add", {a, b})  →  Stack with one Tensor.
Stack call_op(std::string_view full_name, Stack args);

/// Calls through the dispatcher and returns the single tensor output. `args` are already in
/// schema order: for forwarding a stack; typed wrappers use the named form below.
Tensor call_tensor(const OpHandle& op, Stack args);

/// A typed wrapper's call with its arguments named as in the schema (checked at the first
/// call, see Note [Arguments by name]): all outputs, in schema order.
Stack call(const OpHandle& op, NamedArgs args);
/// The same, for an op with one tensor output.
Tensor call_tensor(const OpHandle& op, NamedArgs args);

}  // namespace qflow
