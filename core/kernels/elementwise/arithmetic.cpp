// Broadcasting arithmetic: add, sub, mul, div (tensor and scalar forms, in-place variants).
#include "kernels/common/kernel_utils.h"
#include "kernels/common/channel_loops.h"
#include "kernels/common/loops.h"
#include "kernels/common/opaque_elementwise.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

enum class Arith { Add, Sub, Mul, Div };

constexpr const char* arith_name(Arith k) {
  switch (k) {
    case Arith::Add: return "add";
    case Arith::Sub: return "sub";
    case Arith::Mul: return "mul";
    default: return "div";
  }
}

// Division is true division: integer inputs give float32, like PyTorch.
DType arith_dtype(Arith k, DType common) {
  return (k == Arith::Div && !is_floating(common)) ? DType::Float32 : common;
}

// out = a (op) alpha * b, computed in out's dtype.
template <Arith K>
void arith_into(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  // Truncating alpha = 2.5 to 2 would silently change the result; PyTorch refuses it too.
  QFLOW_CHECK(is_floating(out.dtype()) || alpha.is_integral(),
              "{}: for integral input tensors, argument alpha must not be a floating point number (got {})", arith_name(K),
              alpha);
  const Tensor x = cast(a, out.dtype());
  const Tensor y = cast(b, out.dtype());
  const auto xs = broadcast_strides(x, out.sizes());
  const auto ys = broadcast_strides(y, out.sizes());
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      QFLOW_CHECK(K == Arith::Mul || K == Arith::Add, "{}: not supported for bool tensors", arith_name(K));
      binary_loop<bool, bool, bool>(out, x, xs, y, ys, [](bool p, bool q) { return K == Arith::Add ? (p || q) : (p && q); });
    } else {
      const T al = alpha.to<T>();
      if constexpr (K == Arith::Add) {
        if (al == T(1)) binary_loop<T, T, T>(out, x, xs, y, ys, [](T p, T q) { return T(p + q); });
        else binary_loop<T, T, T>(out, x, xs, y, ys, [al](T p, T q) { return T(p + al * q); });
      } else if constexpr (K == Arith::Sub) {
        if (al == T(1)) binary_loop<T, T, T>(out, x, xs, y, ys, [](T p, T q) { return T(p - q); });
        else binary_loop<T, T, T>(out, x, xs, y, ys, [al](T p, T q) { return T(p - al * q); });
      } else if constexpr (K == Arith::Mul) {
        binary_loop<T, T, T>(out, x, xs, y, ys, [](T p, T q) { return T(p * q); });
      } else {
        binary_loop<T, T, T>(out, x, xs, y, ys, [](T p, T q) { return T(p / q); });
      }
    }
  });
}

template <Arith K>
std::vector<TensorMeta> arith_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  return one(broadcast_shapes(x.sizes(), y.sizes(), arith_name(K)), arith_dtype(K, promote_types(x.dtype(), y.dtype())));
}

template <Arith K>
std::vector<TensorMeta> arith_scalar_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(x.sizes(), arith_dtype(K, result_type(x.dtype(), a.scalar("other"))));
}

// mul and div share add's kernel but have no alpha.
Scalar alpha_of(const OpArgs& a) { return a.has("alpha") ? a.scalar("alpha") : Scalar(1); }

// add on two blocked activations of one layout (a residual connection, gradients meeting in
// the backward pass) keeps the layout; a plain operand joins the opaque one's layout. Other
// cases compute on plain tensors. See Note [Opaque layouts].
bool opaque_add(const OpArgs& a, const Tensor& out_tensor) {
  const Tensor& x = a.tensor("self");
  Tensor y = a.tensor("other");
  if (!x.impl()->opaque_layout() || x.dtype() != DType::Float32 || y.dtype() != DType::Float32 || x.sizes() != y.sizes())
    return false;
  y = joined_to_layout_of(y, x);
  const float al = alpha_of(a).to<float>();
  if (al == 1.0f) opaque_binary_into(out_tensor, x, y, [](float p, float q) { return p + q; });
  else opaque_binary_into(out_tensor, x, y, [al](float p, float q) { return p + al * q; });
  return true;
}

// x * k[c] or x / k[c] for a channel-blocked x (N, C, H, W) and a per-channel k of shape
// (1, C, 1, 1) or (C, 1, 1): QConvBN's running fold divides its convolution's output so. The
// padding lanes get factor 1 for a division (0 / 1) and 0 for a product.
template <Arith K>
bool opaque_per_channel(const OpArgs& a, Tensor& result) {
  const Tensor& x = a.tensor("self");
  const Tensor& k = a.tensor("other");
  const OpaqueLayout* l = x.impl()->opaque_layout();
  if (!l || l->channel_block() == 0 || x.dim() != 4 || x.dtype() != DType::Float32 || k.dtype() != DType::Float32)
    return false;
  const int64_t C = x.sizes()[1];
  const bool per_channel = (k.sizes() == std::vector<int64_t>{1, C, 1, 1}) || (k.sizes() == std::vector<int64_t>{C, 1, 1});
  if (!per_channel || k.impl()->opaque_layout()) return false;
  const ChannelLayout cl{x.sizes()[0], C, x.sizes()[2] * x.sizes()[3], l->channel_block()};
  std::vector<float> factor(cl.padded_channels(), K == Arith::Div ? 1.0f : 0.0f);
  const Tensor kc = contiguous(k);
  std::copy(kc.data_ptr<float>(), kc.data_ptr<float>() + C, factor.begin());
  result = new_opaque_like(x);
  const float* px = opaque_data(x);
  float* py = opaque_data(result);
  const float* f = factor.data();
  if constexpr (K == Arith::Div) channel_map(cl, [=](int64_t i, int64_t c) { py[i] = px[i] / f[c]; });
  else channel_map(cl, [=](int64_t i, int64_t c) { py[i] = px[i] * f[c]; });
  return true;
}

template <Arith K>
Stack arith_kernel(OpArgs& a) {
  const TensorMeta m = arith_meta<K>(a)[0];
  Tensor o = new_tensor(m.sizes, m.dtype);
  arith_into<K>(o, a.tensor("self"), a.tensor("other"), alpha_of(a));
  return out(o);
}

// add, mul and div with a blocked operand: the cases above keep the layout, the others
// compute on plain tensors.
template <Arith K>
Stack arith_blocked_kernel(OpArgs& a) {
  if constexpr (K == Arith::Add) {
    if (a.tensor("self").impl()->opaque_layout()) {
      Tensor o = new_opaque_like(a.tensor("self"));
      if (opaque_add(a, o)) return out(o);
    }
  }
  if constexpr (K == Arith::Mul || K == Arith::Div) {
    Tensor o;
    if (opaque_per_channel<K>(a, o)) return out(o);
    if (K == Arith::Mul && same_opaque_layout(a.tensor("self"), a.tensor("other"))) {  // x * y, one layout
      o = new_opaque_like(a.tensor("self"));
      opaque_binary_into(o, a.tensor("self"), a.tensor("other"), [](float p, float q) { return p * q; });
      return out(o);
    }
  }
  make_plain_args(a);
  return arith_kernel<K>(a);
}

template <Arith K>
Stack arith_scalar_kernel(OpArgs& a) {
  const TensorMeta m = arith_scalar_meta<K>(a)[0];
  Tensor o = new_tensor(m.sizes, m.dtype);
  arith_into<K>(o, a.tensor("self"), scalar_tensor(a.scalar("other"), m.dtype), Scalar(1));
  return out(o);
}

// PyTorch's can_cast: a result may narrow within its category (float64 into float32, int64
// into int8), but not turn floating into integral, or a number into bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return from == DType::Bool || to != DType::Bool;
}

// In-place: the result must keep self's shape and be castable to self's dtype.
void check_inplace(Arith k, const Tensor& self, const std::vector<int64_t>& shape, DType result) {
  QFLOW_CHECK(shape == self.sizes(), "{}_: result of shape {} cannot be written into self of shape {}", arith_name(k),
              shape, self.sizes());
  QFLOW_CHECK(can_cast(result, self.dtype()), "{}_: result dtype {} cannot be cast to self's dtype {}", arith_name(k),
              result, self.dtype());
}

template <Arith K>
Stack arith_inplace_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  const TensorMeta m = arith_meta<K>(a)[0];
  check_inplace(K, self, m.sizes, m.dtype);
  arith_into<K>(self, self, a.tensor("other"), alpha_of(a));
  self.impl()->storage()->bump_version();
  return out(self);
}

Stack add_inplace_blocked_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  if (self.impl()->opaque_layout() && opaque_add(a, self)) {
    self.impl()->storage()->bump_version();
    return out(self);
  }
  make_plain_args(a);
  return arith_inplace_kernel<Arith::Add>(a);
}

template <Arith K>
Stack arith_scalar_inplace_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  const TensorMeta m = arith_scalar_meta<K>(a)[0];
  check_inplace(K, self, m.sizes, m.dtype);
  arith_into<K>(self, self, scalar_tensor(a.scalar("other"), self.dtype()), Scalar(1));
  self.impl()->storage()->bump_version();
  return out(self);
}

std::vector<TensorMeta> self_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), a.tensor("self").dtype()); }

// rsub(x, s) = s - x and rdiv(x, s) = s / x (the reflected scalar forms of `s - x`, `s / x`).
Stack rsub_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const DType dt = result_type(x.dtype(), a.scalar("other"));
  Tensor o = new_tensor(x.sizes(), dt);
  arith_into<Arith::Sub>(o, scalar_tensor(a.scalar("other"), dt), x, Scalar(1));
  return out(o);
}
Stack rdiv_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const DType dt = arith_dtype(Arith::Div, result_type(x.dtype(), a.scalar("other")));
  Tensor o = new_tensor(x.sizes(), dt);
  arith_into<Arith::Div>(o, scalar_tensor(a.scalar("other"), dt), x, Scalar(1));
  return out(o);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/arithmetic.toml (Note [One declaration per op]).
#include "core/ops/arithmetic.inc"
