// Element-wise unary math: neg, abs, sign, round, floor (integer dtypes kept, like PyTorch)
// and exp, log, sqrt, rsqrt, sigmoid, tanh (integer and bool inputs promote to float32).
//
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics once Eigen's packet
// math is inlined (GCC bug 105593, the _mm512_undefined_* idiom); the pragma must precede
// every include because the warning is attributed to the intrinsics header's lines.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <cmath>
#include <type_traits>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/opaque_elementwise.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

template <typename T> using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T> using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// ---- sign-like ops: same dtype in and out -----------------------------------------------------

enum class Exact { Neg, Abs, Sign, Round, Floor };

constexpr const char* exact_name(Exact k) {
  switch (k) {
    case Exact::Neg: return "neg";
    case Exact::Abs: return "abs";
    case Exact::Sign: return "sign";
    case Exact::Round: return "round";
    default: return "floor";
  }
}

// Only sign has a meaning for bool (identity); PyTorch refuses the others.
std::vector<TensorMeta> exact_meta_checked(Exact k, const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  QFLOW_CHECK(k == Exact::Sign || x.dtype() != DType::Bool,
              "{}: not supported for bool tensors{}", exact_name(k),
              k == Exact::Neg ? " (to invert a mask use logical negation, e.g. eq(mask, false))" : "");
  return one(x.sizes(), x.dtype());
}

template <Exact K>
std::vector<TensorMeta> exact_meta(const OpArgs& a) {
  return exact_meta_checked(K, a);
}

template <Exact K, typename T>
T exact_fn(T x) {
  if constexpr (K == Exact::Neg) {
    return static_cast<T>(-x);  // uint8 wraps, like PyTorch
  } else if constexpr (K == Exact::Abs) {
    if constexpr (std::is_unsigned_v<T>) return x;
    else return static_cast<T>(x < T(0) ? -x : x);
  } else if constexpr (K == Exact::Sign) {
    // (0 < x) - (x < 0): sign(-0.0) = 0 and sign(nan) = 0, as PyTorch 1.13 returns.
    if constexpr (std::is_same_v<T, bool>) return x;
    else return static_cast<T>(static_cast<int>(T(0) < x) - static_cast<int>(x < T(0)));
  } else if constexpr (K == Exact::Round) {
    // nearbyint under the default rounding mode is round-half-to-even (round(2.5) = 2).
    if constexpr (std::is_floating_point_v<T>) return std::nearbyint(x);
    else return x;
  } else {
    if constexpr (std::is_floating_point_v<T>) return std::floor(x);
    else return x;
  }
}

// y = f(x); x: any shape and layout, y: contiguous of x's shape and dtype.
template <Exact K>
Stack exact_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const TensorMeta m = exact_meta<K>(a)[0];
  Tensor y = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_loop<T, T>(y, x, [](T v) { return exact_fn<K, T>(v); });
  });
  return out(y);
}

// -x of blocked activations stays blocked: -0 is zero, so the layout's padding stays zero.
Stack neg_blocked_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  if (x.dtype() != DType::Float32) {
    make_plain_args(a);
    return exact_kernel<Exact::Neg>(a);
  }
  exact_meta<Exact::Neg>(a);
  Tensor y = new_opaque_like(x);
  opaque_unary_into(y, x, [](float v) { return -v; });
  return out(y);
}

// ---- transcendental ops: floating output -------------------------------------------------------

enum class Math { Exp, Log, Sqrt, Rsqrt, Sigmoid, Tanh };

DType floating_result(DType t) { return is_floating(t) ? t : DType::Float32; }

std::vector<TensorMeta> math_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(x.sizes(), floating_result(x.dtype()));
}

// Eigen 3.4's generic (SSE/AVX2) exp clamps its argument to about -88.7 (float) / -709.4
// (double) before the polynomial, so exp(-inf) came out as 2.9e-39 instead of 0 in builds
// without AVX-512. Inputs below the clamp (where the true result is a denormal or 0) are
// recomputed with std::exp; they are rare, so the vectorised path keeps its speed.
template <typename T>
constexpr T kEigenExpLowClamp = std::is_same_v<T, float> ? T(-88.0) : T(-708.0);

// Re-does y[i] = exp(arg(i)) with std::exp where arg(i) is below Eigen's clamp.
template <typename T, typename Arg>
void fix_exp_underflow(T* y, int64_t n, Arg arg) {
  for (int64_t i = 0; i < n; ++i) {
    const T a = arg(i);
    if (a < kEigenExpLowClamp<T>) y[i] = std::exp(a);
  }
}

// y[0:n] = f(x[0:n]) on contiguous memory. Eigen's array functions are vectorised (SIMD
// polynomial exp/log/tanh), which a plain loop over std::exp is not without -ffast-math.
template <Math K, typename T>
void math_block(T* y, const T* x, int64_t n) {
  ArrayMap<T> o(y, n);
  ConstArrayMap<T> v(x, n);
  if constexpr (K == Math::Exp) {
    o = v.exp();
    fix_exp_underflow(y, n, [x](int64_t i) { return x[i]; });
  } else if constexpr (K == Math::Log) {
    o = v.log();
  } else if constexpr (K == Math::Sqrt) {
    // Not Eigen's sqrt: with EIGEN_FAST_MATH its SSE version is rsqrt + Newton step, off by an
    // ulp (sqrt(1) = 1.0000001). This loop compiles to the exact sqrtps (-fno-math-errno).
    for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
  } else if constexpr (K == Math::Rsqrt) {
    for (int64_t i = 0; i < n; ++i) y[i] = T(1) / std::sqrt(x[i]);  // correctly rounded sqrt, then 1/y
  } else if constexpr (K == Math::Tanh) {
    o = v.tanh();
  } else {
    // Stable sigmoid: with e = exp(-|x|) <= 1, sigmoid = 1/(1+e) for x >= 0 and e/(1+e) for
    // x < 0, so exp never overflows and tiny results keep their relative precision.
    o = (-v.abs()).exp();
    fix_exp_underflow(y, n, [x](int64_t i) { return -std::abs(x[i]); });
    o = (v >= T(0)).select((T(1) + o).inverse(), o / (T(1) + o));
  }
}

// y = f(x); x: any shape, layout and dtype, y: contiguous, float32 for integer x.
template <Math K>
Stack math_kernel(OpArgs& a) {
  const TensorMeta m = math_meta(a)[0];
  const Tensor x = cast(a.tensor("self"), m.dtype).contiguous();
  Tensor y = new_tensor(m.sizes, m.dtype);
  visit_floating(m.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* yp = y.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    parallel_for(y.numel(), kParallelGrain, [&](int64_t b, int64_t e) { math_block<K, T>(yp + b, xp + b, e - b); });
  });
  return out(y);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/unary.toml (Note [One declaration per op]).
#include "core/ops/unary.inc"
