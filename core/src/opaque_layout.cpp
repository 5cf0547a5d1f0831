// The opaque-layout dispatch layer and the conversion counter. See Note [Opaque layouts].
#include "qflow/core/opaque_layout.h"

#include <atomic>

#include "qflow/core/dispatch.h"
#include "qflow/core/tensor.h"

namespace qflow {
namespace {

std::atomic<int64_t>& conversions() {
  static std::atomic<int64_t> n{0};
  return n;
}

void make_plain(const Value& v) {
  if (v.is_tensor()) {
    if (const Tensor& t = v.tensor(); t.defined()) t.impl()->make_plain();
  } else if (v.is_tensor_list()) {
    for (const Tensor& t : v.tensor_list())
      if (t.defined()) t.impl()->make_plain();
  }
}

// Runs after every other layer: an op that cannot take opaque tensors gets them plain.
class OpaqueLayoutLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "opaque_layout"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    if (!op.accepts_opaque_layout)
      for (const Value& v : args) make_plain(v);
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
