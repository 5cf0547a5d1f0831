// Broadcasting binary math beyond arithmetic: pow (tensor and scalar exponent), minimum, maximum.
#include <cmath>
#include <type_traits>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

// ---- pow --------------------------------------------------------------------------------------

// Integer power by repeated squaring (wraps on overflow, like PyTorch). A negative exponent
// gives 1/x^|e| truncated: 1 for x = 1, ±1 for x = -1, 0 otherwise (PyTorch's answer).
template <typename T>
T int_pow(T x, int64_t e) {
  if constexpr (std::is_same_v<T, bool>) {
    return e != 0 ? x : true;
  } else {
    if (e < 0) {
      if (x == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (x == T(-1)) return (e % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
    // Powers wrap around like PyTorch's; multiplying in uint64_t keeps the low bits without
    // signed overflow, which is undefined behaviour (UBSan, tools/run-tests --sanitize).
    uint64_t result = 1;
    uint64_t base = static_cast<uint64_t>(x);
    for (auto n = static_cast<uint64_t>(e); n != 0; n >>= 1) {
      if (n & 1u) result *= base;
      base *= base;
    }
    return static_cast<T>(result);
  }
}

template <typename T>
T pow_fn(T x, T e) {
  if constexpr (std::is_floating_point_v<T>) return std::pow(x, e);
  else return int_pow(x, static_cast<int64_t>(e));
}

std::vector<TensorMeta> pow_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& e = a.tensor("exponent");
  return one(broadcast_shapes(x.sizes(), e.sizes(), "pow"), promote_types(x.dtype(), e.dtype()));
}

// y = x ** e, broadcast; x, e: any shapes that broadcast, computed in the promoted dtype.
Stack pow_kernel(OpArgs& a) {
  const TensorMeta m = pow_meta(a)[0];
  const Tensor x = cast(a.tensor("self"), m.dtype);
  const Tensor e = cast(a.tensor("exponent"), m.dtype);
  Tensor y = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T, T>(y, x, broadcast_strides(x, m.sizes), e, broadcast_strides(e, m.sizes),
                         [](T p, T q) { return pow_fn(p, q); });
  });
  return out(y);
}

std::vector<TensorMeta> pow_scalar_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Scalar e = a.scalar("exponent");
  const DType t = result_type(x.dtype(), e);
  QFLOW_CHECK(is_floating(t) || e.to_int() >= 0, "pow: integers to negative integer powers are not allowed (exponent {})",
              e);
  return one(x.sizes(), t);
}

// The exponents PyTorch special-cases: plain arithmetic is faster than pow and vectorises.
template <typename T>
void float_pow_scalar(const Tensor& y, const Tensor& x, double e) {
  if (e == 2.0) unary_loop<T, T>(y, x, [](T v) { return v * v; });
  else if (e == 0.5) unary_loop<T, T>(y, x, [](T v) { return std::sqrt(v); });
  else if (e == 3.0) unary_loop<T, T>(y, x, [](T v) { return v * v * v; });
  else if (e == -1.0) unary_loop<T, T>(y, x, [](T v) { return T(1) / v; });
  else if (e == -0.5) unary_loop<T, T>(y, x, [](T v) { return T(1) / std::sqrt(v); });
  else if (e == -2.0) unary_loop<T, T>(y, x, [](T v) { return T(1) / (v * v); });
  else {
    const T ev = static_cast<T>(e);
    unary_loop<T, T>(y, x, [ev](T v) { return std::pow(v, ev); });
  }
}

// y = x ** e; x: any shape and layout, y: contiguous in result_type(x, e).
Stack pow_scalar_kernel(OpArgs& a) {
  const TensorMeta m = pow_scalar_meta(a)[0];
  const Scalar e = a.scalar("exponent");
  const Tensor x = cast(a.tensor("self"), m.dtype);
  Tensor y = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      float_pow_scalar<T>(y, x, e.to_double());
    } else {
      const int64_t ev = e.to_int();
      if (ev == 2) unary_loop<T, T>(y, x, [](T v) { return static_cast<T>(static_cast<uint64_t>(v) * static_cast<uint64_t>(v)); });
      else unary_loop<T, T>(y, x, [ev](T v) { return int_pow(v, ev); });
    }
  });
  return out(y);
}

// ---- minimum / maximum ------------------------------------------------------------------------

enum class Extremum { Min, Max };

constexpr const char* extremum_name(Extremum k) { return k == Extremum::Min ? "minimum" : "maximum"; }

// NaN in either operand gives NaN (PyTorch); `v != v` is the vectorisable isnan.
template <Extremum K, typename T>
T extremum_fn(T a, T b) {
  const bool pick_a = K == Extremum::Min ? a < b : a > b;
  if constexpr (std::is_floating_point_v<T>) return (pick_a || a != a) ? a : b;
  else return pick_a ? a : b;
}

template <Extremum K>
std::vector<TensorMeta> extremum_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  return one(broadcast_shapes(x.sizes(), y.sizes(), extremum_name(K)), promote_types(x.dtype(), y.dtype()));
}

// z = min/max(x, y), broadcast, in the promoted dtype.
template <Extremum K>
Stack extremum_kernel(OpArgs& a) {
  const TensorMeta m = extremum_meta<K>(a)[0];
  const Tensor x = cast(a.tensor("self"), m.dtype);
  const Tensor y = cast(a.tensor("other"), m.dtype);
  Tensor z = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T, T>(z, x, broadcast_strides(x, m.sizes), y, broadcast_strides(y, m.sizes),
                         [](T p, T q) { return extremum_fn<K, T>(p, q); });
  });
  return out(z);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/binary_math.toml (Note [One declaration per op]).
#include "core/ops/binary_math.inc"
