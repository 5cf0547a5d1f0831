#include "qflow/core/dispatch.h"

#include <array>
#include <mutex>

namespace qflow {

namespace {

struct LayerTable {
  std::array<std::shared_ptr<DispatchLayer>, kMaxDispatchKeys> layers;
  std::mutex mutex;  // guards registration only; calls read without locking
};

LayerTable& table() {
  static LayerTable t;
  return t;
}

thread_local DispatchKeySet tls_excluded;
thread_local DispatchKeySet tls_included;

void collect_keys(const Value& v, DispatchKeySet& ks) {
  if (v.is_tensor()) {
    if (const Tensor& t = v.tensor(); t.defined()) ks = ks | t.impl()->keys();
  } else if (v.is_tensor_list()) {
    for (const Tensor& t : v.tensor_list())
      if (t.defined()) ks = ks | t.impl()->keys();
  }
}

}  // namespace

void Dispatcher::register_layer(DispatchKey key, std::shared_ptr<DispatchLayer> layer) {
  QFLOW_CHECK(key < kMaxDispatchKeys, "dispatch key {} out of range [0, {})", key, kMaxDispatchKeys);
  auto& t = table();
  std::lock_guard lock(t.mutex);
  QFLOW_CHECK(!t.layers[key], "dispatch key {} is already taken by layer '{}'", key, t.layers[key]->name());
  t.layers[key] = std::move(layer);
}

void Dispatcher::unregister_layer(DispatchKey key) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  if (key < kMaxDispatchKeys) t.layers[key].reset();
}

DispatchLayer* Dispatcher::layer(DispatchKey key) {
  return key < kMaxDispatchKeys ? table().layers[key].get() : nullptr;
}

DispatchKeySet Dispatcher::keys_of(const Stack& args) {
  DispatchKeySet ks;
  for (const Value& v : args) collect_keys(v, ks);
  return ks;
}

Stack Dispatcher::call(const OpDef& op, Stack args) {
  return redispatch(op, args, (keys_of(args) | tls_included) & ~tls_excluded);
}

Stack Dispatcher::redispatch(const OpDef& op, Stack& args, DispatchKeySet remaining) {
  auto& layers = table().layers;
  while (!remaining.empty()) {
    const DispatchKey k = remaining.highest();
    remaining = remaining.remove(k);
    if (DispatchLayer* layer = layers[k].get()) return layer->handle(op, args, remaining);
  }
  // Ops a kernel calls internally (a cast, a sum) run as plain kernels: no layer above
  // the kernel sees them, so autograd records one node per user-visible op.
  struct BelowAllLayers {
    DispatchKeySet saved = tls_excluded;
    BelowAllLayers() { tls_excluded = DispatchKeySet(~0u); }
    ~BelowAllLayers() { tls_excluded = saved; }
  } below;
  return op.run(args);
}

DispatchKeySet Dispatcher::excluded() { return tls_excluded; }
void Dispatcher::set_excluded(DispatchKeySet keys) { tls_excluded = keys; }

DispatchKeySet Dispatcher::included() { return tls_included; }
void Dispatcher::set_included(DispatchKeySet keys) { tls_included = keys; }

IncludeKeyGuard::IncludeKeyGuard(DispatchKey key) : previous_(tls_included) { tls_included = tls_included.add(key); }
IncludeKeyGuard::~IncludeKeyGuard() { tls_included = previous_; }

ExcludeKeyGuard::ExcludeKeyGuard(DispatchKey key) : previous_(tls_excluded) { tls_excluded = tls_excluded.add(key); }
ExcludeKeyGuard::~ExcludeKeyGuard() { tls_excluded = previous_; }

Stack call_op(std::string_view full_name, Stack args) {
  const OpDef& op = OpRegistry::instance().get(full_name);
  normalize_args(op.schema, args);
  return Dispatcher::call(op, std::move(args));
}

namespace {

Tensor single_tensor(const OpDef& op, Stack out) {
  QFLOW_ASSERT(out.size() == 1 && out[0].is_tensor(), "op {} did not return one tensor", op.name);
  return std::move(out[0].tensor());
}

}  // namespace

Tensor call_tensor(const OpHandle& handle, Stack args) {
  const OpDef& op = handle.get();
  return single_tensor(op, Dispatcher::call(op, std::move(args)));
}

Stack call(const OpHandle& handle, NamedArgs args) {
  const OpDef& op = handle.checked(args);
  Stack stack;
  stack.reserve(args.size());
  for (const NamedArg& a : args) stack.push_back(a.value);
  return Dispatcher::call(op, std::move(stack));
}

Tensor call_tensor(const OpHandle& handle, NamedArgs args) { return single_tensor(handle.get(), call(handle, args)); }

}  // namespace qflow
