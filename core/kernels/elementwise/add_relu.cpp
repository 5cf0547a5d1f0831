// add_relu: relu(self + other) in one pass, the end of every ResNet block (see
// fx::fuse_activations). Results equal relu(add(self, other)) bit for bit: the same sum, then
// relu_fn.
#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "kernels/common/opaque_elementwise.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "kernels/common/relu_fn.h"

namespace qflow {
namespace kernels {
namespace {

// Floating tensors of one dtype, broadcast like add.
std::vector<TensorMeta> add_relu_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  QFLOW_CHECK(is_floating(x.dtype()) && x.dtype() == y.dtype(),
              "add_relu: expected floating point tensors of one dtype, got {} and {}", x.dtype(), y.dtype());
  return one(broadcast_shapes(x.sizes(), y.sizes(), "add_relu"), x.dtype());
}

Stack add_relu_kernel(OpArgs& a) {
  const TensorMeta m = add_relu_meta(a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  Tensor o = new_tensor(m.sizes, m.dtype);
  const auto xs = broadcast_strides(x, m.sizes), ys = broadcast_strides(y, m.sizes);
  visit_floating(m.dtype, "add_relu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T, T>(o, x, xs, y, ys, [](T p, T q) { return relu_fn(T(p + q)); });
  });
  return out(o);
}

// Blocked activations stay blocked; a plain operand joins x's layout (Note [Opaque layouts]).
Stack add_relu_blocked_kernel(OpArgs& a) {
  add_relu_meta(a);
  const Tensor& x = a.tensor("self");
  if (!x.impl()->opaque_layout() || x.dtype() != DType::Float32 || a.tensor("other").sizes() != x.sizes()) {
    make_plain_args(a);
    return add_relu_kernel(a);
  }
  const Tensor y = joined_to_layout_of(a.tensor("other"), x);
  Tensor o = new_opaque_like(x);
  opaque_binary_into(o, x, y, [](float p, float q) { return relu_fn(p + q); });
  return out(o);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/add_relu.toml (Note [One declaration per op]).
#include "core/ops/add_relu.inc"
