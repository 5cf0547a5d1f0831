// Clamping: relu, relu_, clamp, clamp_ (integer dtypes kept; NaN passes through, like PyTorch).
#include <limits>
#include <optional>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "kernels/common/opaque_elementwise.h"
#include "kernels/common/relu_fn.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

// ---- relu -------------------------------------------------------------------------------------

void check_relu_dtype(DType t, const char* op) {
  QFLOW_CHECK(t != DType::Bool, "{}: not supported for bool tensors", op);
}

std::vector<TensorMeta> relu_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  check_relu_dtype(x.dtype(), "relu");
  return one(x.sizes(), x.dtype());
}

// y = max(x, 0); x: any shape and strides, y: contiguous.
Stack relu_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const TensorMeta m = relu_meta(a)[0];
  Tensor y = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) unary_loop<T, T>(y, x, [](T v) { return relu_fn(v); });
  });
  return out(y);
}

// self = max(self, 0) in place; self: any strides.
Stack relu_inplace_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  check_relu_dtype(self.dtype(), "relu_");
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) unary_loop<T, T>(self, self, [](T v) { return relu_fn(v); });
  });
  self.impl()->storage()->bump_version();
  return out(self);
}

// ---- threshold_backward ---------------------------------------------------------------------

// The gradient of relu (threshold 0) from its output: grad where self > threshold, 0 elsewhere
// (a select, not a product, so an inf or NaN gradient where self <= threshold gives 0, like
// where(self > threshold, grad, 0)).
std::vector<TensorMeta> threshold_backward_meta(const OpArgs& a) {
  const Tensor& g = a.tensor("grad_output");
  const Tensor& y = a.tensor("self");
  QFLOW_CHECK(g.sizes() == y.sizes(), "threshold_backward: grad_output has shape {}, self has shape {}", g.sizes(),
              y.sizes());
  QFLOW_CHECK(is_floating(g.dtype()) && g.dtype() == y.dtype(),
              "threshold_backward: expected floating grad_output and self of one dtype, got {} and {}", g.dtype(),
              y.dtype());
  return one(g.sizes(), g.dtype());
}

Stack threshold_backward_kernel(OpArgs& a) {
  const TensorMeta m = threshold_backward_meta(a)[0];
  const Tensor& y = a.tensor("self");
  const Tensor& g = a.tensor("grad_output");
  Tensor gx = new_tensor(m.sizes, m.dtype);
  const auto gs = broadcast_strides(g, m.sizes), ys = broadcast_strides(y, m.sizes);
  visit_floating(m.dtype, "threshold_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T t = a.scalar("threshold").to<T>();
    binary_loop<T, T, T>(gx, g, gs, y, ys, [t](T gv, T yv) { return yv > t ? gv : T(0); });
  });
  return out(gx);
}

// ---- clamp ------------------------------------------------------------------------------------

struct Bounds {
  std::optional<Scalar> min, max;
};

Bounds bounds_of(const OpArgs& a, const char* op) {
  Bounds b{a.optional_scalar("min"), a.optional_scalar("max")};
  QFLOW_CHECK(b.min || b.max, "{}: at least one of 'min' or 'max' must not be None", op);
  return b;
}

// PyTorch promotes through the bounds: clamp(int64 tensor, min=0.5) is float32.
DType clamp_dtype(DType self, const Bounds& b) {
  DType t = self;
  if (b.min) t = promote_types(t, result_type(self, *b.min));
  if (b.max) t = promote_types(t, result_type(self, *b.max));
  return t;
}

// An absent bound: -inf/+inf for floats (lowest() would clip infinities), the range ends for ints.
template <typename T>
T lower_bound_of(const std::optional<Scalar>& s) {
  if (s) return s->to<T>();
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <typename T>
T upper_bound_of(const std::optional<Scalar>& s) {
  if (s) return s->to<T>();
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// dst = min(max(src, lo), hi) in dst's dtype. Applying lo first and hi last gives PyTorch's
// answer when lo > hi (everything becomes hi); comparisons with NaN are false, so NaN stays.
void clamp_into(const Tensor& dst, const Tensor& src, const Bounds& b) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lo = lower_bound_of<T>(b.min);
    const T hi = upper_bound_of<T>(b.max);
    unary_loop<T, T>(dst, src, [lo, hi](T x) {
      const T v = x < lo ? lo : x;
      return v > hi ? hi : v;
    });
  });
}

std::vector<TensorMeta> clamp_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(x.sizes(), clamp_dtype(x.dtype(), bounds_of(a, "clamp")));
}

// y = clamp(x, min, max); x: any shape and layout, y: contiguous.
Stack clamp_kernel(OpArgs& a) {
  const TensorMeta m = clamp_meta(a)[0];
  Tensor y = new_tensor(m.sizes, m.dtype);
  clamp_into(y, cast(a.tensor("self"), m.dtype), bounds_of(a, "clamp"));
  return out(y);
}

std::vector<TensorMeta> self_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), a.tensor("self").dtype()); }

// self = clamp(self, min, max) in place; the bounds may not promote self's dtype.
Stack clamp_inplace_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  const Bounds b = bounds_of(a, "clamp_");
  const DType result = clamp_dtype(self.dtype(), b);
  QFLOW_CHECK(result == self.dtype(), "clamp_: result dtype {} cannot be cast to self's dtype {}", result, self.dtype());
  clamp_into(self, self, b);
  self.impl()->storage()->bump_version();
  return out(self);
}

// ---- blocked layouts (Note [Opaque layouts]): activations stay blocked ----------------------------

Stack relu_blocked_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  relu_meta(a);
  Tensor y = new_opaque_like(x);
  opaque_unary_into(y, x, [](float v) { return relu_fn(v); });  // a lambda inlines; a function pointer does not
  return out(y);
}

Stack relu_inplace_blocked_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  check_relu_dtype(self.dtype(), "relu_");
  opaque_unary_into(self, self, [](float v) { return relu_fn(v); });
  self.impl()->storage()->bump_version();
  return out(self);
}

Stack threshold_backward_blocked_kernel(OpArgs& a) {
  threshold_backward_meta(a);
  const Tensor& y = a.tensor("self");
  if (!y.impl()->opaque_layout() || y.dtype() != DType::Float32) {
    make_plain_args(a);  // the gradient alone is blocked: the plain kernel takes it
    return threshold_backward_kernel(a);
  }
  // A plain gradient (from the classifier) joins the blocked activations here.
  const Tensor g = joined_to_layout_of(a.tensor("grad_output"), y);
  const float t = a.scalar("threshold").to<float>();
  Tensor gx = new_opaque_like(y);
  opaque_binary_into(gx, g, y, [t](float gv, float yv) { return yv > t ? gv : 0.0f; });
  return out(gx);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/clamp.toml (Note [One declaration per op]).
#include "core/ops/clamp.inc"
