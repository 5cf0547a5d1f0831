#pragma once
// The N-d strided indexer shared by qflow's element-wise, copy, index and reduction kernels.
//
// Note [Strided geometry]
// An element-wise kernel sees up to kMaxOperands operands (operand 0 is the output) of one
// logical shape, each with its own element strides (0 on broadcast dims). The host builds a
// StridedGeometry with make_geometry: size-1 dims are dropped, the dims are ordered by the
// output's strides (largest first, so the output is walked in memory order, whatever its
// layout: row-major or channels-last), and adjacent dims that every operand walks
// contiguously are merged. Two outcomes matter for speed:
//  * `dense`: the walk collapsed to one dim of stride 1 for every operand (all operands dense
//    with the same strides, e.g. two channels-last activations, or two row-major tensors): the
//    kernels treat them as flat arrays, 128-bit vectorised when every pointer is aligned;
//  * otherwise the offsets of linear index i are computed by div/mod over at most kMaxDims
//    collapsed dims (32-bit division when the index space fits), e.g. (N*H*W, C) for a
//    channels-last activation plus a per-channel (1, C, 1, 1) operand: one division.
// The struct is plain data (passed to kernels by value, in parameter space) and this header
// compiles as C++ on the host (the *_ops.cpp build geometries) and as CUDA in the .cu files.
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define QFLOW_HD __host__ __device__ __forceinline__
#define QFLOW_DEVICE __device__ __forceinline__
#else
#define QFLOW_HD inline
#endif

namespace qflow::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kMaxOperands = 4;

/// Element types of the launchers: the values of qflow::DType (the *_ops.cpp cast between them).
enum class ScalarType : int { Bool = 0, UInt8 = 1, Int8 = 2, Int32 = 3, Int64 = 4, Float32 = 5, Float64 = 6 };

/// A qflow::Scalar argument as the kernels read it: its value as double and as int64 (an
/// integral scalar beyond 2^53 keeps its exact value), its truth value, and whether it is
/// integral (comparisons of integer tensors with scalars depend on it).
struct ScalarArg {
  double f = 0.0;
  int64_t i = 0;
  bool b = false;
  bool integral = true;
};

struct StridedGeometry {
  int ndim = 0;        // collapsed dims, outermost first; 0: a single element
  int noperands = 0;
  int64_t numel = 1;
  bool dense = false;  // every operand is walked as a flat array (Note [Strided geometry])
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxOperands][kMaxDims] = {};  // in elements
};

/// Builds the geometry of `noperands` operands of logical shape sizes[0, ndim) whose element
/// strides are strides[k][0, ndim) (Note [Strided geometry]). Returns false when more than
/// kMaxDims dims remain after collapsing (the caller makes the operands contiguous first).
inline bool make_geometry(StridedGeometry& g, int ndim, const int64_t* sizes, int noperands,
                          const int64_t* const* strides) {
  g = StridedGeometry{};
  g.noperands = noperands;
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= sizes[d];
  g.numel = numel;
  // The non-trivial dims, then ordered by operand 0's stride, largest first (a stable
  // insertion sort: ties keep the logical order, then operand 1's stride decides).
  int order[64];
  int n = 0;
  for (int d = 0; d < ndim && d < 64; ++d)
    if (sizes[d] != 1) order[n++] = d;
  if (numel == 0) n = 0;
  for (int i = 1; i < n; ++i) {
    const int d = order[i];
    int j = i;
    while (j > 0) {
      const int p = order[j - 1];
      bool before = strides[0][d] > strides[0][p];
      if (strides[0][d] == strides[0][p] && noperands > 1) before = strides[1][d] > strides[1][p];
      if (!before) break;
      order[j] = p;
      --j;
    }
    order[j] = d;
  }
  // Merge dim order[i] into the previous collapsed dim when every operand walks on across it.
  int64_t cs[64];
  int64_t cst[kMaxOperands][64];
  int m = 0;
  for (int i = 0; i < n; ++i) {
    const int d = order[i];
    if (m > 0) {
      bool mergeable = true;
      for (int k = 0; k < noperands; ++k)
        if (cst[k][m - 1] != strides[k][d] * sizes[d]) mergeable = false;
      if (mergeable) {
        cs[m - 1] *= sizes[d];
        for (int k = 0; k < noperands; ++k) cst[k][m - 1] = strides[k][d];
        continue;
      }
    }
    cs[m] = sizes[d];
    for (int k = 0; k < noperands; ++k) cst[k][m] = strides[k][d];
    ++m;
  }
  if (m > kMaxDims) return false;
  g.ndim = m;
  for (int i = 0; i < m; ++i) {
    g.sizes[i] = cs[i];
    for (int k = 0; k < noperands; ++k) g.strides[k][i] = cst[k][i];
  }
  bool dense = m <= 1;
  if (m == 1)
    for (int k = 0; k < noperands; ++k) dense = dense && cst[k][0] == 1;
  g.dense = dense;
  return true;
}

#if defined(__CUDACC__)

/// The element offsets of linear index `i` for the first N operands of g.
template <int N>
QFLOW_DEVICE void geometry_offsets(const StridedGeometry& g, int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (g.numel <= 0xFFFFFFFFll) {  // 32-bit division is several times cheaper
    uint32_t r = static_cast<uint32_t>(i);
    for (int d = g.ndim - 1; d >= 0; --d) {
      const uint32_t s = static_cast<uint32_t>(g.sizes[d]);
      const uint32_t idx = d == 0 ? r : r % s;
      r = d == 0 ? 0 : r / s;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(idx) * g.strides[k][d];
    }
  } else {
    int64_t r = i;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t idx = d == 0 ? r : r % g.sizes[d];
      r = d == 0 ? 0 : r / g.sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += idx * g.strides[k][d];
    }
  }
}

/// A group of N elements loaded or stored with one instruction (16 bytes for 4 floats).
template <typename T, int N>
struct alignas(sizeof(T) * N) VecN {
  T v[N];
};

template <int VEC, typename T>
QFLOW_HD bool vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * VEC) == 0;
}

inline constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `items` work items: enough to fill the device
/// (8 blocks of 256 threads per SM), never more than the work needs.
/// The number of SMs of the current device (cached per thread and device).
inline int sm_count() {
  static thread_local int sms = 0;
  static thread_local int sms_device = -1;
  int dev = 0;
  cudaGetDevice(&dev);
  if (sms == 0 || sms_device != dev) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) sms = 132;
    sms_device = dev;
  }
  return sms;
}

/// Blocks for a grid-stride loop over `items` work items: enough to fill the device
/// (2048 resident threads per SM), never more than the work needs.
inline unsigned grid_for(int64_t items, int threads = kThreads) {
  const int64_t want = (items + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * (2048 / threads);
  const int64_t g = want < cap ? want : cap;
  return static_cast<unsigned>(g < 1 ? 1 : g);
}

namespace detail {
template <int... I>
struct IntSeq {};
template <int N, int... I>
struct MakeIntSeq : MakeIntSeq<N - 1, N - 1, I...> {};
template <int... I>
struct MakeIntSeq<0, I...> {
  using type = IntSeq<I...>;
};
}  // namespace detail

/// out[i] = f(in_0[i], ..., in_k[i]) over flat arrays, VEC elements per load (dense operands).
template <int VEC, typename TO, typename F, typename... TI>
__global__ void __launch_bounds__(kThreads) dense_kernel(int64_t n, F f, TO* out, const TI*... in) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (VEC > 1) {
    const int64_t nvec = n / VEC;
    for (int64_t v = tid; v < nvec; v += stride) {
      VecN<TO, VEC> o;
      const auto apply = [&](const VecN<TI, VEC>&... x) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.v[j] = f(x.v[j]...);
      };
      apply(reinterpret_cast<const VecN<TI, VEC>*>(in)[v]...);
      reinterpret_cast<VecN<TO, VEC>*>(out)[v] = o;
    }
    for (int64_t i = nvec * VEC + tid; i < n; i += stride) out[i] = f(in[i]...);
  } else {
    for (int64_t i = tid; i < n; i += stride) out[i] = f(in[i]...);
  }
}

template <typename TO, typename F, typename... TI, int... K>
QFLOW_DEVICE void strided_apply(const int64_t (&off)[sizeof...(TI) + 1], F& f, TO* out, detail::IntSeq<K...>,
                                const TI*... in) {
  out[off[0]] = f(in[off[K + 1]]...);
}

/// out = f(in...) through the geometry's strides (operand 0: out, then the inputs in order).
template <typename TO, typename F, typename... TI>
__global__ void __launch_bounds__(kThreads) strided_kernel(StridedGeometry g, F f, TO* out, const TI*... in) {
  constexpr int N = sizeof...(TI) + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += stride) {
    int64_t off[N];
    geometry_offsets<N>(g, i, off);
    strided_apply(off, f, out, typename detail::MakeIntSeq<N - 1>::type{}, in...);
  }
}

/// Runs out = f(in...) over geometry g on `stream`: the vectorised flat kernel for dense,
/// aligned operands, the flat scalar kernel for dense unaligned ones, the strided one otherwise.
/// Pointers are the operands' element 0 (for dense operands also their lowest address).
template <typename TO, typename F, typename... TI>
void launch_elementwise(const StridedGeometry& g, cudaStream_t stream, const F& f, TO* out, const TI*... in) {
  if (g.numel == 0) return;
  if (g.dense) {
    constexpr int kVec = sizeof(TO) >= 8 ? 2 : 4;
    bool aligned = vec_aligned<kVec>(out);
    const bool in_aligned[] = {true, vec_aligned<kVec>(in)...};
    for (bool a : in_aligned) aligned = aligned && a;
    if (aligned && g.numel >= kVec) {
      dense_kernel<kVec, TO, F, TI...><<<grid_for((g.numel + kVec - 1) / kVec), kThreads, 0, stream>>>(g.numel, f, out,
                                                                                                       in...);
    } else {
      dense_kernel<1, TO, F, TI...><<<grid_for(g.numel), kThreads, 0, stream>>>(g.numel, f, out, in...);
    }
  } else {
    strided_kernel<TO, F, TI...><<<grid_for(g.numel), kThreads, 0, stream>>>(g, f, out, in...);
  }
}

/// Calls body(TypeTag<T>{}) for the C++ type of `t` (every type).
template <typename T>
struct TypeTag {
  using type = T;
};

template <typename Fn>
void dispatch_all(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::Bool: fn(TypeTag<bool>{}); break;
    case ScalarType::UInt8: fn(TypeTag<uint8_t>{}); break;
    case ScalarType::Int8: fn(TypeTag<int8_t>{}); break;
    case ScalarType::Int32: fn(TypeTag<int32_t>{}); break;
    case ScalarType::Int64: fn(TypeTag<int64_t>{}); break;
    case ScalarType::Float32: fn(TypeTag<float>{}); break;
    case ScalarType::Float64: fn(TypeTag<double>{}); break;
  }
}

/// Every type but bool (bool does nothing: the registration refused it before).
template <typename Fn>
void dispatch_no_bool(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::UInt8: fn(TypeTag<uint8_t>{}); break;
    case ScalarType::Int8: fn(TypeTag<int8_t>{}); break;
    case ScalarType::Int32: fn(TypeTag<int32_t>{}); break;
    case ScalarType::Int64: fn(TypeTag<int64_t>{}); break;
    case ScalarType::Float32: fn(TypeTag<float>{}); break;
    case ScalarType::Float64: fn(TypeTag<double>{}); break;
    default: break;
  }
}

/// float32 and float64 only (others do nothing: the registration refused them before).
template <typename Fn>
void dispatch_floating(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::Float32: fn(TypeTag<float>{}); break;
    case ScalarType::Float64: fn(TypeTag<double>{}); break;
    default: break;
  }
}

/// A ScalarArg read as T, the way qflow::Scalar::to<T>() reads it.
template <typename T>
QFLOW_HD T scalar_as(const ScalarArg& s) {
  if constexpr (std::is_same_v<T, bool>) {
    return s.b;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(s.f);
  } else {
    return s.integral ? static_cast<T>(s.i) : static_cast<T>(s.f);
  }
}

#endif  // __CUDACC__

}  // namespace qflow::cuda
