// The fake_quantize op family: kernel, shape rule and registration (its derivative is in
// fake_quantize_derivative.cpp), and quantize, which stores the integers fake_quantize rounds
// to. See Note [Quantization numerics] in fake_quantize.h.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <cmath>
#include <type_traits>
#include <vector>

#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/op_registry.h"
#include "qflow/core/opaque_tensor.h"
#include "qflow/core/parallel.h"
#include "qflow/quant/fake_quantize.h"

namespace qflow::quant {
namespace {

// How self is split into channels: self viewed as (outer, channels, inner), row-major. Per
// tensor is channels = 1, inner = numel.
struct ChannelLayout {
  int64_t channels = 1;
  int64_t inner = 1;
};

// Checks everything that needs no data (so the shape rule can run on fx proxies).
// The three ops (and the backward) name these arguments alike.
ChannelLayout check_args(const OpArgs& a, const char* op) {
  const Tensor& self = a.tensor("self");
  const Tensor& scale = a.tensor("scale");
  const Tensor& zero_point = a.tensor("zero_point");
  const int64_t qmin = a.to_int("quant_min"), qmax = a.to_int("quant_max");
  int64_t axis = a.to_int("axis");
  QFLOW_CHECK(self.dtype() == DType::Float32 || self.dtype() == DType::Float64,
              "{}: expected a float32 or float64 input, got {}", op, self.dtype());
  QFLOW_CHECK(scale.is_floating_point(), "{}: scale must be a floating point tensor, got {}", op, scale.dtype());
  QFLOW_CHECK(zero_point.dtype() != DType::Bool, "{}: zero_point must be a number tensor, got bool", op);
  QFLOW_CHECK(scale.dim() <= 1 && zero_point.dim() <= 1 && scale.numel() == zero_point.numel() && scale.numel() > 0,
              "{}: scale and zero_point must be 0-d or 1-d with the same number of elements, got shapes {} and {}", op,
              scale.sizes(), zero_point.sizes());
  QFLOW_CHECK(qmin < qmax, "{}: quant_min ({}) must be less than quant_max ({})", op, qmin, qmax);
  // Beyond 2^22 the rounding trick of the kernel is no longer exact (see round_half_even).
  QFLOW_CHECK(qmin >= -(int64_t{1} << 22) && qmax <= (int64_t{1} << 22),
              "{}: the grid [{}, {}] is too wide (at most 2^22 in magnitude)", op, qmin, qmax);
  ChannelLayout layout;
  layout.inner = self.numel();
  if (scale.numel() == 1) return layout;
  const int64_t ndim = self.dim();
  QFLOW_CHECK(axis >= -ndim && axis < ndim, "{}: axis {} is out of range for an input of shape {}", op, axis,
              self.sizes());
  if (axis < 0) axis += ndim;
  QFLOW_CHECK(self.sizes()[axis] == scale.numel(),
              "{}: per-channel scale has {} elements but the input of shape {} has {} channels along axis {}", op,
              scale.numel(), self.sizes(), self.sizes()[axis], axis);
  layout.channels = scale.numel();
  layout.inner = 1;
  for (int64_t d = axis + 1; d < ndim; ++d) layout.inner *= self.sizes()[d];
  return layout;
}

std::vector<TensorMeta> fake_quantize_meta(const OpArgs& a) {
  check_args(a, "fake_quantize");
  const Tensor& x = a.tensor("self");
  return {TensorMeta{x.sizes(), x.dtype()}};
}

std::vector<TensorMeta> fake_quantize_backward_meta(const OpArgs& a) {
  check_args(a, "fake_quantize_backward");
  const Tensor& g = a.tensor("grad_output");
  const Tensor& x = a.tensor("self");
  QFLOW_CHECK(g.sizes() == x.sizes(), "fake_quantize_backward: grad_output of shape {} does not match self of shape {}",
              g.sizes(), x.sizes());
  return {TensorMeta{x.sizes(), x.dtype()}};
}

// Per-channel parameters in the compute type, validated: a negative or non-finite scale is
// a caller bug that would silently produce NaN.
template <typename T>
void read_qparams(const Tensor& scale, const Tensor& zero_point, const char* op, std::vector<T>& s, std::vector<T>& z) {
  const std::vector<double> sd = to_vector<double>(scale);
  const std::vector<double> zd = to_vector<double>(zero_point);
  s.resize(sd.size());
  z.resize(zd.size());
  for (size_t c = 0; c < sd.size(); ++c) {
    QFLOW_CHECK(std::isfinite(sd[c]) && sd[c] >= 0.0, "{}: scale must be finite and non-negative, got {} (channel {})",
                op, sd[c], c);
    QFLOW_CHECK(std::isfinite(zd[c]), "{}: zero_point must be finite, got {} (channel {})", op, zd[c], c);
    s[c] = static_cast<T>(sd[c]);
    z[c] = static_cast<T>(zd[c]);
  }
}

// Round half to even for |v| <= 2^22 under the default rounding mode: adding 1.5 * 2^(digits-1)
// moves v into the binade where the spacing is exactly 1, so the addition itself rounds.
// Unlike std::nearbyint this compiles to plain SIMD adds without SSE4.1.
template <typename T>
inline T round_half_even(T v) {
  constexpr T kMagic = std::is_same_v<T, float> ? T(12582912.0) : T(6755399441055744.0);  // 1.5·2^23, 1.5·2^52
  return (v + kMagic) - kMagic;
}

// y[j] = (clamp(round(x[j] / s + z), lo, hi) - z) * s for one channel's contiguous run.
// Clamping before rounding is the same as after (lo and hi are integers and rounding is
// monotone) and keeps the value in round_half_even's exact range.
template <typename T>
void quantize_run(const T* __restrict x, T* __restrict y, int64_t n, T s, T z, T lo, T hi) {
  if (s == T(0)) {  // zero range: identity (see Note [Quantization numerics])
    std::copy(x, x + n, y);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    T v = x[j] / s + z;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    y[j] = (round_half_even(v) - z) * s;
  }
}

// q[j] = clamp(round(x[j] / s + z), lo, hi) as the integer type Q: fake_quantize's integers.
// A NaN has no integer (casting it is undefined behaviour, which UBSan reported): the clamp is
// written so that it takes lo, as -inf does. (quantize_run keeps it NaN: it stays float.)
template <typename T, typename Q>
void integer_run(const T* __restrict x, Q* __restrict q, int64_t n, T s, T z, T lo, T hi) {
  for (int64_t j = 0; j < n; ++j) {
    T v = x[j] / s + z;
    v = v >= lo ? v : lo;
    v = v > hi ? hi : v;
    q[j] = static_cast<Q>(round_half_even(v));
  }
}

// g[j] kept where round(x[j] / s + z) lies in [lo, hi]. Not a hot path: std::nearbyint is
// exact for any magnitude.
template <typename T>
void clip_gradient_run(const T* __restrict g, const T* __restrict x, T* __restrict y, int64_t n, T s, T z, T lo, T hi) {
  if (s == T(0)) {
    std::copy(g, g + n, y);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const T q = std::nearbyint(x[j] / s + z);
    y[j] = (q >= lo && q <= hi) ? g[j] : T(0);
  }
}

// Runs fn(begin, end, channel) over [0, n) in parallel, split at channel boundaries.
template <typename Fn>
void for_each_channel_run(int64_t n, const ChannelLayout& layout, const Fn& fn) {
  parallel_for(n, kParallelGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t row = i / layout.inner;
      const int64_t stop = std::min(end, (row + 1) * layout.inner);
      fn(i, stop, static_cast<size_t>(row % layout.channels));
      i = stop;
    }
  });
}

void make_plain_args_of(const OpArgs& a) {
  for (const Value& v : a.stack())
    if (v.is_tensor() && v.tensor().defined()) v.tensor().impl()->make_plain();
}

// A per-tensor fake quantization of a blocked activation maps its storage element by element
// and keeps the layout (Note [Opaque layouts] in core); per-channel ones (weights) and padded
// layouts (whose zero padding a zero point outside the grid would not keep) are made plain.
bool keeps_opaque_layout(const OpArgs& a, const ChannelLayout& layout) {
  const Tensor& x = a.tensor("self");
  if (layout.channels == 1 && x.dtype() == DType::Float32 && is_unpadded_opaque(x)) return true;
  make_plain_args_of(a);
  return false;
}

// The storage `t` is read from: its own for blocked tensors, a contiguous copy otherwise.
Tensor storage_order(const Tensor& t, bool opaque) { return opaque ? t : t.contiguous(); }
template <typename T>
T* elements(const Tensor& t) { return static_cast<T*>(opaque_storage_ptr(t)); }

// self: any shape (read contiguous); scale/zero_point: (1) or (C); out: self's shape, contiguous
// (or self's opaque layout).
Stack fake_quantize_kernel(OpArgs& a) {
  const ChannelLayout layout = check_args(a, "fake_quantize");
  const bool opaque = keeps_opaque_layout(a, layout);
  const Tensor x = storage_order(a.tensor("self"), opaque);
  Tensor y = opaque ? empty_opaque_like(x) : empty(x.sizes(), x.dtype());
  visit_floating(x.dtype(), "fake_quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> s, z;
    read_qparams(a.tensor("scale"), a.tensor("zero_point"), "fake_quantize", s, z);
    const T lo = static_cast<T>(a.to_int("quant_min")), hi = static_cast<T>(a.to_int("quant_max"));
    const T* px = elements<T>(x);
    T* py = elements<T>(y);
    for_each_channel_run(x.numel(), layout, [&](int64_t b, int64_t e, size_t c) {
      quantize_run(px + b, py + b, e - b, s[c], z[c], lo, hi);
    });
  });
  return {Value(std::move(y))};
}

std::vector<TensorMeta> quantize_meta(const OpArgs& a) {
  check_args(a, "quantize");
  const DType dtype = a.dtype("dtype");
  const int64_t lo = a.to_int("quant_min"), hi = a.to_int("quant_max");
  const auto [min, max] = dtype == DType::UInt8  ? std::pair<int64_t, int64_t>{0, 255}
                          : dtype == DType::Int8 ? std::pair<int64_t, int64_t>{-128, 127}
                                                 : std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
  QFLOW_CHECK(dtype == DType::UInt8 || dtype == DType::Int8 || dtype == DType::Int32,
              "quantize: dtype must be uint8, int8 or int32, got {}", dtype);
  QFLOW_CHECK(lo >= min && hi <= max, "quantize: the grid [{}, {}] does not fit {}", lo, hi, dtype);
  return {TensorMeta{a.tensor("self").sizes(), dtype}};
}

// The integers of a per-tensor quantization of an unpadded blocked activation keep its
// arrangement of elements (Note [Integer activations]): an integer convolution reading them in
// that layout needs no reorder. Undefined when they cannot (the tensor is then made plain).
Tensor opaque_integers(const OpArgs& a, const ChannelLayout& layout, DType dtype) {
  const Tensor& x = a.tensor("self");
  if (layout.channels != 1 || x.dtype() != DType::Float32 || !is_unpadded_opaque(x)) return Tensor();
  return empty_opaque_like(x, dtype);
}

// self: any shape (read contiguous, or in its opaque layout) → the integers, contiguous (or in
// the same opaque arrangement).
Stack quantize_kernel(OpArgs& a) {
  const TensorMeta m = quantize_meta(a)[0];
  const ChannelLayout layout = check_args(a, "quantize");
  Tensor q = opaque_integers(a, layout, m.dtype);
  const bool opaque = q.defined();
  if (!opaque) make_plain_args_of(a);
  const Tensor x = storage_order(a.tensor("self"), opaque);
  if (!opaque) q = empty(m.sizes, m.dtype);
  visit_floating(x.dtype(), "quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> s, z;
    read_qparams(a.tensor("scale"), a.tensor("zero_point"), "quantize", s, z);
    for (size_t c = 0; c < s.size(); ++c)
      QFLOW_CHECK(s[c] > T(0), "quantize: scale 0 (channel {}) has no integer grid (a zero range: keep such a layer in float)", c);
    const T lo = static_cast<T>(a.to_int("quant_min")), hi = static_cast<T>(a.to_int("quant_max"));
    const T* px = elements<T>(x);
    auto run = [&](auto* pq) {
      for_each_channel_run(x.numel(), layout, [&](int64_t b, int64_t e, size_t c) {
        integer_run(px + b, pq + b, e - b, s[c], z[c], lo, hi);
      });
    };
    if (m.dtype == DType::UInt8) run(elements<uint8_t>(q));
    else if (m.dtype == DType::Int8) run(elements<int8_t>(q));
    else run(elements<int32_t>(q));
  });
  return {Value(std::move(q))};
}

// grad_output, self: same shape; result: grad_output masked by the clipped estimator.
Stack fake_quantize_backward_kernel(OpArgs& a) {
  const ChannelLayout layout = check_args(a, "fake_quantize_backward");
  const bool opaque = keeps_opaque_layout(a, layout) && a.tensor("grad_output").dtype() == DType::Float32;
  if (!opaque) make_plain_args_of(a);
  const Tensor x = storage_order(a.tensor("self"), opaque);
  const Tensor g =
      opaque ? to_opaque_layout_of(a.tensor("grad_output"), x) : a.tensor("grad_output").to(x.dtype()).contiguous();
  Tensor y = opaque ? empty_opaque_like(x) : empty(x.sizes(), x.dtype());
  visit_floating(x.dtype(), "fake_quantize_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> s, z;
    read_qparams(a.tensor("scale"), a.tensor("zero_point"), "fake_quantize_backward", s, z);
    const T lo = static_cast<T>(a.to_int("quant_min")), hi = static_cast<T>(a.to_int("quant_max"));
    const T* pg = elements<T>(g);
    const T* px = elements<T>(x);
    T* py = elements<T>(y);
    for_each_channel_run(x.numel(), layout, [&](int64_t b, int64_t e, size_t c) {
      clip_gradient_run(pg + b, px + b, py + b, e - b, s[c], z[c], lo, hi);
    });
  });
  return {Value(std::move(y))};
}

}  // namespace
}  // namespace qflow::quant

namespace qflow::quant {

Tensor fake_quantize(const Tensor& self, const Tensor& scale, const Tensor& zero_point, int64_t quant_min,
                     int64_t quant_max, int64_t axis, bool clipped_ste) {
  static const OpHandle op("fake_quantize");
  return call_tensor(op, {{"self", self}, {"scale", scale}, {"zero_point", zero_point}, {"quant_min", quant_min},
                          {"quant_max", quant_max}, {"axis", axis}, {"clipped_ste", clipped_ste}});
}

Tensor quantize(const Tensor& self, const Tensor& scale, const Tensor& zero_point, int64_t quant_min, int64_t quant_max,
                int64_t axis, DType dtype) {
  static const OpHandle op("quantize");
  return call_tensor(op, {{"self", self}, {"scale", scale}, {"zero_point", zero_point}, {"quant_min", quant_min},
                          {"quant_max", quant_max}, {"axis", axis}, {"dtype", dtype}});
}

Tensor fake_quantize_backward(const Tensor& grad_output, const Tensor& self, const Tensor& scale,
                              const Tensor& zero_point, int64_t quant_min, int64_t quant_max, int64_t axis) {
  static const OpHandle op("fake_quantize_backward");
  return call_tensor(op, {{"grad_output", grad_output}, {"self", self}, {"scale", scale}, {"zero_point", zero_point},
                          {"quant_min", quant_min}, {"quant_max", quant_max}, {"axis", axis}});
}

}  // namespace qflow::quant

// The registration of quant/ops/fake_quantize.toml (Note [One declaration per op]).
#include "quant/ops/fake_quantize.inc"
