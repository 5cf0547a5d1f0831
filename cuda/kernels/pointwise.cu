// Element-wise CUDA kernels: unary math and activations, scalar and broadcasting binary
// arithmetic, activation gradients, comparisons, where, dropout and random fills. The element
// functions are those of core/kernels (unary.cpp, clamp.cpp, activation.cpp, arithmetic.cpp,
// binary_math.cpp, compare.cpp, dropout.cpp, random.cpp) written for the device; the loops
// are strided.cuh's (Note [Strided geometry]).
#include <cuda_runtime.h>

#pragma nv_diag_suppress 186  // "pointless comparison of unsigned integer with zero": generic code for uint8

#include <cstdint>
#include <type_traits>

#include "kernels/pointwise.cuh"
#include "kernels/strided.cuh"

namespace qflow::cuda {
namespace {

template <typename T>
constexpr bool kFloating = std::is_floating_point_v<T>;
template <typename T>
constexpr bool kBool = std::is_same_v<T, bool>;

// ---- device math, overloaded by type ----------------------------------------------------------

__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_log(float x) { return logf(x); }
__device__ __forceinline__ double d_log(double x) { return log(x); }
__device__ __forceinline__ float d_sqrt(float x) { return sqrtf(x); }  // IEEE-rounded (-prec-sqrt=true)
__device__ __forceinline__ double d_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float d_pow(float x, float e) { return powf(x, e); }
__device__ __forceinline__ double d_pow(double x, double e) { return pow(x, e); }
__device__ __forceinline__ float d_rint(float x) { return rintf(x); }  // round half to even
__device__ __forceinline__ double d_rint(double x) { return rint(x); }
__device__ __forceinline__ float d_floor(float x) { return floorf(x); }
__device__ __forceinline__ double d_floor(double x) { return floor(x); }
__device__ __forceinline__ float d_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double d_abs(double x) { return fabs(x); }

template <typename T>
__device__ __forceinline__ T relu_fn(T x) {
  return x < T(0) ? T(0) : x;  // NaN propagates (core/kernels/common/relu_fn.h)
}

template <typename T>
__device__ __forceinline__ T clip(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// Stable: e = exp(-|x|) <= 1; 1/(1+e) for x >= 0, e/(1+e) below (unary.cpp, activation.cpp).
template <typename T>
__device__ __forceinline__ T stable_sigmoid(T x) {
  const T ex = d_exp(-d_abs(x));
  return x >= T(0) ? T(1) / (T(1) + ex) : ex / (T(1) + ex);
}

// Integer power by repeated squaring, wrapping like PyTorch (binary_math.cpp's int_pow).
template <typename T>
__device__ __forceinline__ T int_pow(T x, int64_t e) {
  if constexpr (kBool<T>) {
    return e != 0 ? x : true;
  } else {
    if (e < 0) {
      if (x == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (x == T(-1)) return (e % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
    uint64_t result = 1;
    uint64_t base = static_cast<uint64_t>(static_cast<int64_t>(x));
    for (uint64_t n = static_cast<uint64_t>(e); n != 0; n >>= 1) {
      if (n & 1u) result *= base;
      base *= base;
    }
    return static_cast<T>(result);
  }
}

// ---- unary ------------------------------------------------------------------------------------

// The float exponents PyTorch (and the CPU kernel) special-case.
enum class PowMode : int { Square, Sqrt, Cube, Reciprocal, RSqrt, RSquare, General };

template <UnaryOp K, typename T>
struct UnaryFn {
  T p0{}, p1{};
  int64_t e = 0;  // integer exponent
  PowMode mode = PowMode::General;

  __device__ __forceinline__ T operator()(T x) const {
    if constexpr (K == UnaryOp::Neg) {
      return static_cast<T>(-x);
    } else if constexpr (K == UnaryOp::Abs) {
      if constexpr (kFloating<T>) return d_abs(x);
      else if constexpr (std::is_unsigned_v<T> || kBool<T>) return x;
      else return static_cast<T>(x < T(0) ? -x : x);
    } else if constexpr (K == UnaryOp::Sign) {
      if constexpr (kBool<T>) return x;
      else return static_cast<T>(static_cast<int>(T(0) < x) - static_cast<int>(x < T(0)));
    } else if constexpr (K == UnaryOp::Round) {
      if constexpr (kFloating<T>) return d_rint(x);
      else return x;
    } else if constexpr (K == UnaryOp::Floor) {
      if constexpr (kFloating<T>) return d_floor(x);
      else return x;
    } else if constexpr (K == UnaryOp::Exp) {
      return d_exp(x);
    } else if constexpr (K == UnaryOp::Log) {
      return d_log(x);
    } else if constexpr (K == UnaryOp::Sqrt) {
      return d_sqrt(x);
    } else if constexpr (K == UnaryOp::Rsqrt) {
      return T(1) / d_sqrt(x);  // correctly rounded sqrt, then 1/y: the CPU's result
    } else if constexpr (K == UnaryOp::Sigmoid) {
      return stable_sigmoid(x);
    } else if constexpr (K == UnaryOp::Tanh) {
      return d_tanh(x);
    } else if constexpr (K == UnaryOp::Relu) {
      return relu_fn(x);
    } else if constexpr (K == UnaryOp::Clamp) {
      const T v = x < p0 ? p0 : x;  // lower first, upper last (clamp.cpp)
      return v > p1 ? p1 : v;
    } else if constexpr (K == UnaryOp::Hardtanh) {
      return clip(x, p0, p1);
    } else if constexpr (K == UnaryOp::Relu6) {
      return clip(x, T(0), T(6));
    } else if constexpr (K == UnaryOp::Hardswish) {
      return x * clip(x + T(3), T(0), T(6)) / T(6);
    } else if constexpr (K == UnaryOp::Hardsigmoid) {
      return clip(x + T(3), T(0), T(6)) / T(6);
    } else if constexpr (K == UnaryOp::LeakyRelu) {
      return x > T(0) ? x : x * p0;
    } else if constexpr (K == UnaryOp::Silu) {
      return x * stable_sigmoid(x);  // activation.cpp's arithmetic
    } else if constexpr (K == UnaryOp::AddScalar) {
      if constexpr (kBool<T>) return x || p0;
      else return static_cast<T>(x + p0);
    } else if constexpr (K == UnaryOp::SubScalar) {
      return static_cast<T>(x - p0);
    } else if constexpr (K == UnaryOp::MulScalar) {
      if constexpr (kBool<T>) return x && p0;
      else return static_cast<T>(x * p0);
    } else if constexpr (K == UnaryOp::DivScalar) {
      return static_cast<T>(x / p0);
    } else if constexpr (K == UnaryOp::RSubScalar) {
      return static_cast<T>(p0 - x);
    } else if constexpr (K == UnaryOp::RDivScalar) {
      return static_cast<T>(p0 / x);
    } else {  // PowScalar
      if constexpr (kFloating<T>) {
        switch (mode) {
          case PowMode::Square: return x * x;
          case PowMode::Sqrt: return d_sqrt(x);
          case PowMode::Cube: return x * x * x;
          case PowMode::Reciprocal: return T(1) / x;
          case PowMode::RSqrt: return T(1) / d_sqrt(x);
          case PowMode::RSquare: return T(1) / (x * x);
          default: return d_pow(x, p0);
        }
      } else if constexpr (kBool<T>) {
        return int_pow(x, e);
      } else {
        if (e == 2) {
          const uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(x));
          return static_cast<T>(v * v);
        }
        return int_pow(x, e);
      }
    }
  }
};

template <UnaryOp K>
constexpr int unary_types() {  // 0: all, 1: all but bool, 2: floating
  switch (K) {
    case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sqrt: case UnaryOp::Rsqrt: case UnaryOp::Sigmoid:
    case UnaryOp::Tanh: case UnaryOp::Hardtanh: case UnaryOp::Relu6: case UnaryOp::Hardswish: case UnaryOp::Hardsigmoid: case UnaryOp::Silu:
    case UnaryOp::LeakyRelu:
      return 2;
    case UnaryOp::Relu: case UnaryOp::SubScalar: case UnaryOp::DivScalar: case UnaryOp::RSubScalar:
    case UnaryOp::RDivScalar:
      return 1;
    default:
      return 0;
  }
}

template <typename Fn>
void dispatch_types(int types, ScalarType t, Fn&& fn) {
  if (types == 2) dispatch_floating(t, fn);
  else if (types == 1) dispatch_no_bool(t, fn);
  else dispatch_all(t, fn);
}

bool type_in(int types, ScalarType t) {
  const bool floating = t == ScalarType::Float32 || t == ScalarType::Float64;
  return types == 0 || (types == 1 && t != ScalarType::Bool) || (types == 2 && floating);
}

template <UnaryOp K>
void run_unary(ScalarType dtype, const StridedGeometry& g, void* out, const void* in, ScalarArg p0, ScalarArg p1,
               cudaStream_t stream) {
  dispatch_types(unary_types<K>(), dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr ((unary_types<K>() == 2 && !kFloating<T>) || (unary_types<K>() == 1 && kBool<T>)) {
      return;
    } else {
      UnaryFn<K, T> f;
      f.p0 = scalar_as<T>(p0);
      f.p1 = scalar_as<T>(p1);
      if constexpr (K == UnaryOp::PowScalar) {
        f.e = p0.integral ? p0.i : 0;  // a floating exponent makes the result floating
        const double e = p0.f;
        f.mode = e == 2.0    ? PowMode::Square
                 : e == 0.5  ? PowMode::Sqrt
                 : e == 3.0  ? PowMode::Cube
                 : e == -1.0 ? PowMode::Reciprocal
                 : e == -0.5 ? PowMode::RSqrt
                 : e == -2.0 ? PowMode::RSquare
                             : PowMode::General;
      }
      launch_elementwise(g, stream, f, static_cast<T*>(out), static_cast<const T*>(in));
    }
  });
}

// ---- binary -----------------------------------------------------------------------------------

template <BinaryOp K, typename T>
struct BinaryFn {
  T p0{}, p1{};

  __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (K == BinaryOp::Add) {
      if constexpr (kBool<T>) return a || b;
      else return static_cast<T>(a + p0 * b);
    } else if constexpr (K == BinaryOp::Sub) {
      return static_cast<T>(a - p0 * b);
    } else if constexpr (K == BinaryOp::Mul) {
      if constexpr (kBool<T>) return a && b;
      else return static_cast<T>(a * b);
    } else if constexpr (K == BinaryOp::Div) {
      return a / b;
    } else if constexpr (K == BinaryOp::AddRelu) {
      return relu_fn(static_cast<T>(a + b));
    } else if constexpr (K == BinaryOp::Pow) {
      if constexpr (kFloating<T>) return d_pow(a, b);
      else return int_pow(a, static_cast<int64_t>(b));
    } else if constexpr (K == BinaryOp::Minimum || K == BinaryOp::Maximum) {
      const bool pick_a = K == BinaryOp::Minimum ? a < b : a > b;
      if constexpr (kFloating<T>) return (pick_a || a != a) ? a : b;  // NaN wins
      else return pick_a ? a : b;
    } else if constexpr (K == BinaryOp::ThresholdBackward) {
      return b > p0 ? a : T(0);
    } else if constexpr (K == BinaryOp::HardtanhBackward) {
      return (b > p0 && b < p1) ? a : T(0);
    } else if constexpr (K == BinaryOp::HardswishBackward) {
      return b < T(-3) ? T(0) : (b <= T(3) ? a * (b / T(3) + T(0.5)) : a);
    } else if constexpr (K == BinaryOp::HardsigmoidBackward) {
      return (b > T(-3) && b < T(3)) ? a / T(6) : T(0);
    } else if constexpr (K == BinaryOp::SiluBackward) {
      const T sig = stable_sigmoid(b);
      return a * sig * (T(1) + b * (T(1) - sig));
    } else {  // LeakyReluBackward
      return b > T(0) ? a : a * p0;
    }
  }
};

template <BinaryOp K>
constexpr int binary_types() {
  switch (K) {
    case BinaryOp::Div: case BinaryOp::AddRelu: case BinaryOp::ThresholdBackward: case BinaryOp::HardtanhBackward:
    case BinaryOp::HardswishBackward: case BinaryOp::HardsigmoidBackward: case BinaryOp::LeakyReluBackward:
    case BinaryOp::SiluBackward:
      return 2;
    case BinaryOp::Sub:
      return 1;
    default:
      return 0;
  }
}

template <BinaryOp K>
void run_binary(ScalarType dtype, const StridedGeometry& g, void* out, const void* a, const void* b, ScalarArg p0,
                ScalarArg p1, cudaStream_t stream) {
  dispatch_types(binary_types<K>(), dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr ((binary_types<K>() == 2 && !kFloating<T>) || (binary_types<K>() == 1 && kBool<T>)) {
      return;
    } else {
      BinaryFn<K, T> f;
      f.p0 = scalar_as<T>(p0);
      f.p1 = scalar_as<T>(p1);
      launch_elementwise(g, stream, f, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b));
    }
  });
}

// ---- comparisons and where ---------------------------------------------------------------------

template <CompareOp K, typename T>
__device__ __forceinline__ bool cmp_fn(T a, T b) {
  if constexpr (K == CompareOp::Eq) return a == b;
  else if constexpr (K == CompareOp::Ne) return a != b;
  else if constexpr (K == CompareOp::Lt) return a < b;
  else if constexpr (K == CompareOp::Le) return a <= b;
  else if constexpr (K == CompareOp::Gt) return a > b;
  else return a >= b;
}

template <CompareOp K, typename T>
struct CompareFn {
  __device__ __forceinline__ bool operator()(T a, T b) const { return cmp_fn<K, T>(a, b); }
};

// Floating tensors compare in their dtype; integer ones in int64 against an integral scalar
// and in double against a floating one (compare.cpp's Note [Comparing with a scalar]).
template <CompareOp K, typename T>
struct CompareScalarFn {
  T st{};
  int64_t si = 0;
  double sd = 0;
  bool integral = true;
  __device__ __forceinline__ bool operator()(T a) const {
    if constexpr (kFloating<T>) return cmp_fn<K, T>(a, st);
    else if (integral) return cmp_fn<K, int64_t>(static_cast<int64_t>(a), si);
    else return cmp_fn<K, double>(static_cast<double>(a), sd);
  }
};

template <CompareOp K>
void run_compare(ScalarType dtype, const StridedGeometry& g, bool* out, const void* a, const void* b,
                 cudaStream_t stream) {
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(g, stream, CompareFn<K, T>{}, out, static_cast<const T*>(a), static_cast<const T*>(b));
  });
}

template <CompareOp K>
void run_compare_scalar(ScalarType dtype, const StridedGeometry& g, bool* out, const void* a, ScalarArg s,
                        cudaStream_t stream) {
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CompareScalarFn<K, T> f;
    if constexpr (kFloating<T>) f.st = scalar_as<T>(s);  // integers compare in int64 or double
    f.si = s.i;
    f.sd = s.f;
    f.integral = s.integral;
    launch_elementwise(g, stream, f, out, static_cast<const T*>(a));
  });
}

template <typename T>
struct WhereFn {
  __device__ __forceinline__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <typename T>
struct MaskedScaleFn {
  T scale;
  __device__ __forceinline__ T operator()(T v, bool m) const { return m ? v * scale : T(0); }
};

// ---- Philox (generator.cpp's philox4x32, bit for bit) --------------------------------------------

struct Words {
  uint32_t w[4];
};

__device__ __forceinline__ Words philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                            uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint32_t hi0 = __umulhi(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = __umulhi(kMul1, c2), lo1 = kMul1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  return Words{{c0, c1, c2, c3}};
}

__device__ __forceinline__ Words philox_block(const PhiloxDraw& d, uint64_t block) {
  const uint64_t index = d.first_block + block;
  return philox4x32(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u, d.key0, d.key1);
}

__device__ __forceinline__ uint64_t join(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }
// random.cpp's unit_float / unit_double / open_unit32 / open_unit64.
__device__ __forceinline__ float unit_float(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
__device__ __forceinline__ double unit_double(uint64_t w) { return static_cast<double>(w >> 11) * 0x1p-53; }
__device__ __forceinline__ double open_unit32(uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1p-32; }
__device__ __forceinline__ double open_unit64(uint64_t w) { return (static_cast<double>(w >> 11) + 0.5) * 0x1p-53; }

__device__ __forceinline__ void box_muller(double u1, double u2, double& z0, double& z1) {
  const double r = sqrt(-2.0 * log(u1));
  const double theta = 2.0 * 3.141592653589793238462643383279502884 * u2;
  z0 = r * cos(theta);
  z1 = r * sin(theta);
}

// The (up to) 4 float32 or 2 float64 values of Philox block b of a draw.
template <typename T, bool Normal>
__device__ __forceinline__ void draw_block(const PhiloxDraw& d, uint64_t b, T (&v)[4]) {
  const Words w = philox_block(d, b);
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (Normal) {
      double z[4];
      box_muller(open_unit32(w.w[0]), open_unit32(w.w[1]), z[0], z[1]);
      box_muller(open_unit32(w.w[2]), open_unit32(w.w[3]), z[2], z[3]);
#pragma unroll
      for (int l = 0; l < 4; ++l) v[l] = static_cast<float>(z[l]);
    } else {
#pragma unroll
      for (int l = 0; l < 4; ++l) v[l] = unit_float(w.w[l]);
    }
  } else {
    if constexpr (Normal) {
      double z0, z1;
      box_muller(open_unit64(join(w.w[0], w.w[1])), open_unit64(join(w.w[2], w.w[3])), z0, z1);
      v[0] = z0;
      v[1] = z1;
    } else {
      v[0] = unit_double(join(w.w[0], w.w[1]));
      v[1] = unit_double(join(w.w[2], w.w[3]));
    }
    v[2] = v[3] = 0;
  }
}

template <typename T, bool Normal>
__global__ void __launch_bounds__(kThreads) random_kernel(T* out, int64_t n, PhiloxDraw d) {
  constexpr int kPer = std::is_same_v<T, float> ? 4 : 2;
  const int64_t blocks = (n + kPer - 1) / kPer;
  const bool aligned = vec_aligned<kPer>(out);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T v[4];
    draw_block<T, Normal>(d, static_cast<uint64_t>(b), v);
    const int64_t at = b * kPer;
    if (aligned && at + kPer <= n) {
      VecN<T, kPer> o;
#pragma unroll
      for (int l = 0; l < kPer; ++l) o.v[l] = v[l];
      reinterpret_cast<VecN<T, kPer>*>(out)[b] = o;
    } else {
      for (int l = 0; l < kPer && at + l < n; ++l) out[at + l] = v[l];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) dropout_kernel(int64_t n, T* y, bool* mask, const T* x, T keep_prob,
                                                           T scale, PhiloxDraw d) {
  constexpr int kPer = std::is_same_v<T, float> ? 4 : 2;
  const int64_t blocks = (n + kPer - 1) / kPer;
  const bool aligned = vec_aligned<kPer>(y) && vec_aligned<kPer>(x) && vec_aligned<kPer>(mask);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T u[4];
    draw_block<T, false>(d, static_cast<uint64_t>(b), u);
    const int64_t at = b * kPer;
    if (aligned && at + kPer <= n) {
      const VecN<T, kPer> xv = reinterpret_cast<const VecN<T, kPer>*>(x)[b];
      VecN<T, kPer> yv;
      VecN<bool, kPer> mv;
#pragma unroll
      for (int l = 0; l < kPer; ++l) {
        const bool keep = u[l] < keep_prob;  // kept with probability 1 - p
        mv.v[l] = keep;
        yv.v[l] = keep ? xv.v[l] * scale : T(0);
      }
      reinterpret_cast<VecN<T, kPer>*>(y)[b] = yv;
      reinterpret_cast<VecN<bool, kPer>*>(mask)[b] = mv;
    } else {
      for (int l = 0; l < kPer && at + l < n; ++l) {
        const bool keep = u[l] < keep_prob;
        mask[at + l] = keep;
        y[at + l] = keep ? x[at + l] * scale : T(0);
      }
    }
  }
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

bool unary_supports(UnaryOp op, ScalarType dtype) {
  switch (op) {
#define QFLOW_UNARY_CASE(K) \
  case UnaryOp::K: return type_in(unary_types<UnaryOp::K>(), dtype);
    QFLOW_UNARY_CASE(Neg) QFLOW_UNARY_CASE(Abs) QFLOW_UNARY_CASE(Sign) QFLOW_UNARY_CASE(Round)
    QFLOW_UNARY_CASE(Floor) QFLOW_UNARY_CASE(Exp) QFLOW_UNARY_CASE(Log) QFLOW_UNARY_CASE(Sqrt)
    QFLOW_UNARY_CASE(Rsqrt) QFLOW_UNARY_CASE(Sigmoid) QFLOW_UNARY_CASE(Tanh) QFLOW_UNARY_CASE(Relu)
    QFLOW_UNARY_CASE(Clamp) QFLOW_UNARY_CASE(Hardtanh) QFLOW_UNARY_CASE(Relu6) QFLOW_UNARY_CASE(Hardswish) QFLOW_UNARY_CASE(Hardsigmoid) QFLOW_UNARY_CASE(Silu)
    QFLOW_UNARY_CASE(LeakyRelu) QFLOW_UNARY_CASE(AddScalar) QFLOW_UNARY_CASE(SubScalar)
    QFLOW_UNARY_CASE(MulScalar) QFLOW_UNARY_CASE(DivScalar) QFLOW_UNARY_CASE(RSubScalar)
    QFLOW_UNARY_CASE(RDivScalar) QFLOW_UNARY_CASE(PowScalar)
#undef QFLOW_UNARY_CASE
  }
  return false;
}

bool binary_supports(BinaryOp op, ScalarType dtype) {
  switch (op) {
#define QFLOW_BINARY_CASE(K) \
  case BinaryOp::K: return type_in(binary_types<BinaryOp::K>(), dtype);
    QFLOW_BINARY_CASE(Add) QFLOW_BINARY_CASE(Sub) QFLOW_BINARY_CASE(Mul) QFLOW_BINARY_CASE(Div)
    QFLOW_BINARY_CASE(AddRelu) QFLOW_BINARY_CASE(Pow) QFLOW_BINARY_CASE(Minimum) QFLOW_BINARY_CASE(Maximum)
    QFLOW_BINARY_CASE(ThresholdBackward) QFLOW_BINARY_CASE(HardtanhBackward) QFLOW_BINARY_CASE(HardswishBackward) QFLOW_BINARY_CASE(HardsigmoidBackward) QFLOW_BINARY_CASE(SiluBackward)
    QFLOW_BINARY_CASE(LeakyReluBackward)
#undef QFLOW_BINARY_CASE
  }
  return false;
}

void launch_unary(UnaryOp op, ScalarType dtype, const StridedGeometry& g, void* out, const void* in, ScalarArg p0,
                  ScalarArg p1, cudaStream_t stream) {
  switch (op) {
#define QFLOW_UNARY_CASE(K) \
  case UnaryOp::K: run_unary<UnaryOp::K>(dtype, g, out, in, p0, p1, stream); break;
    QFLOW_UNARY_CASE(Neg) QFLOW_UNARY_CASE(Abs) QFLOW_UNARY_CASE(Sign) QFLOW_UNARY_CASE(Round)
    QFLOW_UNARY_CASE(Floor) QFLOW_UNARY_CASE(Exp) QFLOW_UNARY_CASE(Log) QFLOW_UNARY_CASE(Sqrt)
    QFLOW_UNARY_CASE(Rsqrt) QFLOW_UNARY_CASE(Sigmoid) QFLOW_UNARY_CASE(Tanh) QFLOW_UNARY_CASE(Relu)
    QFLOW_UNARY_CASE(Clamp) QFLOW_UNARY_CASE(Hardtanh) QFLOW_UNARY_CASE(Relu6) QFLOW_UNARY_CASE(Hardswish) QFLOW_UNARY_CASE(Hardsigmoid) QFLOW_UNARY_CASE(Silu)
    QFLOW_UNARY_CASE(LeakyRelu) QFLOW_UNARY_CASE(AddScalar) QFLOW_UNARY_CASE(SubScalar)
    QFLOW_UNARY_CASE(MulScalar) QFLOW_UNARY_CASE(DivScalar) QFLOW_UNARY_CASE(RSubScalar)
    QFLOW_UNARY_CASE(RDivScalar) QFLOW_UNARY_CASE(PowScalar)
#undef QFLOW_UNARY_CASE
  }
}

void launch_binary(BinaryOp op, ScalarType dtype, const StridedGeometry& g, void* out, const void* a, const void* b,
                   ScalarArg p0, ScalarArg p1, cudaStream_t stream) {
  switch (op) {
#define QFLOW_BINARY_CASE(K) \
  case BinaryOp::K: run_binary<BinaryOp::K>(dtype, g, out, a, b, p0, p1, stream); break;
    QFLOW_BINARY_CASE(Add) QFLOW_BINARY_CASE(Sub) QFLOW_BINARY_CASE(Mul) QFLOW_BINARY_CASE(Div)
    QFLOW_BINARY_CASE(AddRelu) QFLOW_BINARY_CASE(Pow) QFLOW_BINARY_CASE(Minimum) QFLOW_BINARY_CASE(Maximum)
    QFLOW_BINARY_CASE(ThresholdBackward) QFLOW_BINARY_CASE(HardtanhBackward) QFLOW_BINARY_CASE(HardswishBackward) QFLOW_BINARY_CASE(HardsigmoidBackward) QFLOW_BINARY_CASE(SiluBackward)
    QFLOW_BINARY_CASE(LeakyReluBackward)
#undef QFLOW_BINARY_CASE
  }
}

void launch_compare(CompareOp op, ScalarType dtype, const StridedGeometry& g, bool* out, const void* a, const void* b,
                    cudaStream_t stream) {
  switch (op) {
    case CompareOp::Eq: run_compare<CompareOp::Eq>(dtype, g, out, a, b, stream); break;
    case CompareOp::Ne: run_compare<CompareOp::Ne>(dtype, g, out, a, b, stream); break;
    case CompareOp::Lt: run_compare<CompareOp::Lt>(dtype, g, out, a, b, stream); break;
    case CompareOp::Le: run_compare<CompareOp::Le>(dtype, g, out, a, b, stream); break;
    case CompareOp::Gt: run_compare<CompareOp::Gt>(dtype, g, out, a, b, stream); break;
    case CompareOp::Ge: run_compare<CompareOp::Ge>(dtype, g, out, a, b, stream); break;
  }
}

void launch_compare_scalar(CompareOp op, ScalarType dtype, const StridedGeometry& g, bool* out, const void* a,
                           ScalarArg s, cudaStream_t stream) {
  switch (op) {
    case CompareOp::Eq: run_compare_scalar<CompareOp::Eq>(dtype, g, out, a, s, stream); break;
    case CompareOp::Ne: run_compare_scalar<CompareOp::Ne>(dtype, g, out, a, s, stream); break;
    case CompareOp::Lt: run_compare_scalar<CompareOp::Lt>(dtype, g, out, a, s, stream); break;
    case CompareOp::Le: run_compare_scalar<CompareOp::Le>(dtype, g, out, a, s, stream); break;
    case CompareOp::Gt: run_compare_scalar<CompareOp::Gt>(dtype, g, out, a, s, stream); break;
    case CompareOp::Ge: run_compare_scalar<CompareOp::Ge>(dtype, g, out, a, s, stream); break;
  }
}

void launch_where(ScalarType dtype, const StridedGeometry& g, void* out, const bool* c, const void* a, const void* b,
                  cudaStream_t stream) {
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(g, stream, WhereFn<T>{}, static_cast<T*>(out), c, static_cast<const T*>(a),
                       static_cast<const T*>(b));
  });
}

void launch_masked_scale(ScalarType dtype, const StridedGeometry& g, void* out, const void* grad, const bool* mask,
                         double scale, cudaStream_t stream) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(g, stream, MaskedScaleFn<T>{static_cast<T>(scale)}, static_cast<T*>(out),
                       static_cast<const T*>(grad), mask);
  });
}

void launch_random(ScalarType dtype, bool normal, void* out, int64_t n, PhiloxDraw draw, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = static_cast<int64_t>(philox_blocks(n, dtype));
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (normal) random_kernel<T, true><<<grid_for(blocks), kThreads, 0, stream>>>(static_cast<T*>(out), n, draw);
    else random_kernel<T, false><<<grid_for(blocks), kThreads, 0, stream>>>(static_cast<T*>(out), n, draw);
  });
}

void launch_dropout(ScalarType dtype, int64_t n, void* y, bool* mask, const void* x, double keep_prob, double scale,
                    PhiloxDraw draw, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = static_cast<int64_t>(philox_blocks(n, dtype));
  dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropout_kernel<T><<<grid_for(blocks), kThreads, 0, stream>>>(n, static_cast<T*>(y), mask, static_cast<const T*>(x),
                                                                static_cast<T>(keep_prob), static_cast<T>(scale), draw);
  });
}

}  // namespace qflow::cuda
