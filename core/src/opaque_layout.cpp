// The opaque-layout dispatch layer and the conversion counter. See Note [Opaque layouts].
#include "qflow/core/opaque_layout.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "qflow/core/dispatch.h"
#include "qflow/core/tensor.h"

namespace qflow {
namespace {

std::atomic<int64_t>& conversions() {
  static std::atomic<int64_t> n{0};
  return n;
}

// QFLOW_LOG_LAYOUT_CONVERSIONS=1 names, on stderr, every op that made an opaque tensor plain:
// how one finds the op that breaks a chain of blocked layers.
bool log_conversions() {
  static const bool on = [] {
    const char* v = std::getenv("QFLOW_LOG_LAYOUT_CONVERSIONS");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

void make_plain(const OpDef& op, const Tensor& t) {
  if (!t.defined() || !t.impl()->opaque_layout()) return;
  if (log_conversions())
    std::fprintf(stderr, "qflow: %s converts a %s tensor of shape [%s] to plain\n", op.name.c_str(),
                 t.impl()->opaque_layout()->name().c_str(), fmt::format("{}", fmt::join(t.sizes(), ", ")).c_str());
  t.impl()->make_plain();
}

void make_plain(const OpDef& op, const Value& v) {
  if (v.is_tensor()) {
    make_plain(op, v.tensor());
  } else if (v.is_tensor_list()) {
    for (const Tensor& t : v.tensor_list()) make_plain(op, t);
  }
}

// Runs after every other layer: an op that cannot take opaque tensors gets them plain.
class OpaqueLayoutLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "opaque_layout"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    if (!op.blocked_kernel)
      for (const Value& v : args) make_plain(op, v);
    return Dispatcher::redispatch(op, args, remaining);
  }
};

const bool registered = [] {
  Dispatcher::register_layer(kOpaqueLayoutKey, std::make_shared<OpaqueLayoutLayer>());
  return true;
}();

}  // namespace

int64_t layout_conversion_count() { return conversions().load(std::memory_order_relaxed); }
void reset_layout_conversion_count() { conversions().store(0); }
void count_layout_conversion() { conversions().fetch_add(1, std::memory_order_relaxed); }

}  // namespace qflow
