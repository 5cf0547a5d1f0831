// Reduction kernels (Note [CUDA reductions] in reduce.cuh): one kernel per reduction, rows or
// columns schedule, optional split of the reduced positions across blocks with an ordered
// second pass; plus the scatter of value_selecting_reduction_backward.
#include <cuda_runtime.h>

#pragma nv_diag_suppress 186  // "pointless comparison of unsigned integer with zero": generic code for uint8

#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/reduce.cuh"
#include "kernels/strided.cuh"

namespace qflow::cuda {
namespace {

template <typename T>
constexpr bool kFloating = std::is_floating_point_v<T>;

__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_log(float x) { return logf(x); }
__device__ __forceinline__ double d_log(double x) { return log(x); }

// Warp shuffle of any trivially copyable accumulator, 32 bits at a time.
template <typename T>
__device__ __forceinline__ T shfl_down_any(const T& v, int delta, int width) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  union U {
    T t;
    int w[kWords];
  };
  U u;
  u.t = v;
#pragma unroll
  for (int i = 0; i < kWords; ++i) u.w[i] = __shfl_down_sync(0xffffffffu, u.w[i], delta, width);
  return u.t;
}

// ---- reducers: identity, step, combine (b follows a), write ------------------------------------

template <typename T, typename Acc, typename Out, int NIn>
struct SumR {
  using in_t = T;
  using acc_t = Acc;
  static constexpr int kInputs = NIn;
  Out* out;
  double scale;
  __device__ __forceinline__ acc_t identity() const { return Acc(0); }
  __device__ __forceinline__ void step(acc_t& a, T v, int64_t) const { a += static_cast<Acc>(v); }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const { return a + b; }
  __device__ __forceinline__ void write(int64_t o, acc_t a) const {
    if constexpr (kFloating<Acc>) out[o] = static_cast<Out>(static_cast<double>(a) * scale);
    else out[o] = static_cast<Out>(a);
  }
};

// Welford's running (count, mean, M2); Chan et al.'s pairwise combination.
template <typename T>
struct VarR {
  struct acc_t {
    int64_t n;
    T mean, m2;
  };
  using in_t = T;
  static constexpr int kInputs = 1;
  T* out;
  double ddof;
  bool take_sqrt;
  __device__ __forceinline__ acc_t identity() const { return {0, T(0), T(0)}; }
  __device__ __forceinline__ void step(acc_t& a, T v, int64_t) const {
    a.n += 1;
    const T delta = v - a.mean;
    a.mean += delta / static_cast<T>(a.n);
    a.m2 += delta * (v - a.mean);
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const int64_t n = a.n + b.n;
    const T delta = b.mean - a.mean;
    const T wb = static_cast<T>(b.n) / static_cast<T>(n);
    return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * static_cast<T>(a.n) * wb};
  }
  __device__ __forceinline__ void write(int64_t o, acc_t a) const {
    const double m2 = a.m2 > T(0) ? static_cast<double>(a.m2) : 0.0;
    const double var = m2 / (static_cast<double>(a.n) - ddof);  // n <= ddof: NaN/inf like PyTorch
    out[o] = static_cast<T>(take_sqrt ? sqrt(var) : var);
  }
};

// Online logsumexp: (m, s) with the result m + log(s), s the sum of exp(x - m). -inf elements
// add nothing; a NaN makes the result NaN; a +inf maximum is the result (reduce.cpp's rules).
template <typename T>
struct LogSumExpR {
  struct acc_t {
    T m, s;
  };
  using in_t = T;
  static constexpr int kInputs = 1;
  T* out;
  __device__ __forceinline__ acc_t identity() const { return {-std::numeric_limits<T>::infinity(), T(0)}; }
  __device__ __forceinline__ void step(acc_t& a, T v, int64_t) const {
    if (v != v) {
      a = {v, v};
    } else if (a.m != a.m || v == -std::numeric_limits<T>::infinity()) {
      return;
    } else if (v > a.m) {
      a.s = a.s * d_exp(a.m - v) + T(1);
      a.m = v;
    } else {
      a.s += d_exp(v - a.m);
    }
  }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (a.m != a.m) return a;
    if (b.m != b.m) return b;
    if (b.m == -std::numeric_limits<T>::infinity()) return a;
    if (a.m == -std::numeric_limits<T>::infinity()) return b;
    const T m = a.m > b.m ? a.m : b.m;
    return {m, a.s * d_exp(a.m - m) + b.s * d_exp(b.m - m)};
  }
  __device__ __forceinline__ void write(int64_t o, acc_t a) const {
    const bool finite = a.m == a.m && a.m != std::numeric_limits<T>::infinity() &&
                        a.m != -std::numeric_limits<T>::infinity();
    out[o] = finite ? static_cast<T>(a.m + d_log(a.s)) : a.m;
  }
};

template <typename T, bool IsMax>
__device__ __forceinline__ T extremum_identity() {
  if constexpr (kFloating<T>) return IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  else return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// True when v strictly beats a (the first NaN beats every number).
template <typename T, bool IsMax>
__device__ __forceinline__ bool beats(T v, T a) {
  const bool wins = IsMax ? (v > a) : (v < a);
  if constexpr (kFloating<T>) return wins || (v != v && a == a);
  else return wins;
}

template <typename T, bool IsMax>
struct ExtremumR {
  using in_t = T;
  using acc_t = T;
  static constexpr int kInputs = 1;
  T* out;
  __device__ __forceinline__ acc_t identity() const { return extremum_identity<T, IsMax>(); }
  __device__ __forceinline__ void step(acc_t& a, T v, int64_t) const { a = combine(a, v); }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t v) const {
    const bool wins = IsMax ? (v > a) : (v < a);
    if constexpr (kFloating<T>) return (wins || v != v) ? v : a;
    else return wins ? v : a;
  }
  __device__ __forceinline__ void write(int64_t o, acc_t a) const { out[o] = a; }
};

// Value and position of the first extremum: ties go to the smaller position whatever order
// partial results meet in, so the answer is the CPU's.
template <typename T, bool IsMax>
struct ArgExtremumR {
  struct acc_t {
    T value;
    int64_t index;
  };
  using in_t = T;
  static constexpr int kInputs = 1;
  T* values;  // may be null
  int64_t* indices;
  __device__ __forceinline__ acc_t identity() const {
    return {extremum_identity<T, IsMax>(), std::numeric_limits<int64_t>::max()};
  }
  __device__ __forceinline__ void step(acc_t& a, T v, int64_t idx) const { a = combine(a, acc_t{v, idx}); }
  __device__ __forceinline__ acc_t combine(acc_t a, acc_t b) const {
    if (beats<T, IsMax>(b.value, a.value)) return b;
    if (!beats<T, IsMax>(a.value, b.value) && b.index < a.index) return b;
    return a;
  }
  __device__ __forceinline__ void write(int64_t o, acc_t a) const {
    if (values) values[o] = a.value;
    indices[o] = a.index == std::numeric_limits<int64_t>::max() ? 0 : a.index;
  }
};

// ---- the kernels ----------------------------------------------------------------------------------

template <bool Red, int NIn>
__device__ __forceinline__ void group_offsets(const ReduceGeometry& g, int64_t i, int64_t (&off)[2]) {
  off[0] = off[1] = 0;
  const int nd = Red ? g.red_ndim : g.out_ndim;
  for (int d = nd - 1; d >= 0; --d) {
    const int64_t size = Red ? g.red_sizes[d] : g.out_sizes[d];
    const int64_t idx = d == 0 ? i : i % size;
    i = d == 0 ? 0 : i / size;
#pragma unroll
    for (int k = 0; k < NIn; ++k) off[k] += idx * (Red ? g.red_strides[k][d] : g.out_strides[k][d]);
  }
}

template <typename R>
__device__ __forceinline__ typename R::in_t load_input(const typename R::in_t* in0, const typename R::in_t* in1,
                                                      int64_t o0, int64_t o1) {
  using T = typename R::in_t;
  if constexpr (R::kInputs == 2) return static_cast<T>(in0[o0] * in1[o1]);
  else return in0[o0];
}

template <typename R>
__device__ __forceinline__ void emit(const R& r, int64_t o, int64_t num_outputs, const typename R::acc_t& acc,
                                     typename R::acc_t* partials) {
  if (gridDim.y == 1) r.write(o, acc);
  else partials[static_cast<int64_t>(blockIdx.y) * num_outputs + o] = acc;
}

// Block (bx, by). Rows: output blockIdx.x * by + ty, lanes along x. Columns: output
// blockIdx.x * bx + tx, lanes along y. blockIdx.y picks the chunk of reduced positions.
template <typename R>
__global__ void __launch_bounds__(512) reduce_kernel(ReduceGeometry g, R r, const typename R::in_t* in0,
                                                     const typename R::in_t* in1, bool column, int64_t chunk,
                                                     typename R::acc_t* partials) {
  using acc_t = typename R::acc_t;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* smem = reinterpret_cast<acc_t*>(smem_raw);
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
  const int64_t o = column ? static_cast<int64_t>(blockIdx.x) * bx + tx : static_cast<int64_t>(blockIdx.x) * by + ty;
  const int lane = column ? ty : tx;
  const int lanes = column ? by : bx;
  const int64_t rb = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t re = rb + chunk < g.reduce_numel ? rb + chunk : g.reduce_numel;

  acc_t acc = r.identity();
  if (o < g.num_outputs) {
    int64_t base[2];
    group_offsets<false, R::kInputs>(g, o, base);
    const typename R::in_t* p0 = in0 + base[0];
    const typename R::in_t* p1 = R::kInputs == 2 ? in1 + base[1] : nullptr;
    if (g.red_ndim <= 1) {
      const int64_t s0 = g.red_ndim == 1 ? g.red_strides[0][0] : 0;
      const int64_t s1 = g.red_ndim == 1 ? g.red_strides[1][0] : 0;
#pragma unroll 4
      for (int64_t i = rb + lane; i < re; i += lanes) r.step(acc, load_input<R>(p0, p1, i * s0, i * s1), i);
    } else {
      for (int64_t i = rb + lane; i < re; i += lanes) {
        int64_t off[2];
        group_offsets<true, R::kInputs>(g, i, off);
        r.step(acc, load_input<R>(p0, p1, off[0], off[1]), i);
      }
    }
  }

  if (column) {
    smem[ty * bx + tx] = acc;
    __syncthreads();
    for (int s = by / 2; s > 0; s >>= 1) {
      if (ty < s) smem[ty * bx + tx] = r.combine(smem[ty * bx + tx], smem[(ty + s) * bx + tx]);
      __syncthreads();
    }
    if (ty == 0 && o < g.num_outputs) emit(r, o, g.num_outputs, smem[tx], partials);
  } else {
    const int width = bx < 32 ? bx : 32;
    for (int s = width / 2; s > 0; s >>= 1) acc = r.combine(acc, shfl_down_any(acc, s, width));
    if (bx > 32) {
      const int warps = bx / 32;
      if ((tx & 31) == 0) smem[ty * warps + tx / 32] = acc;
      __syncthreads();
      if (tx < 32) {
        acc = tx < warps ? smem[ty * warps + tx] : r.identity();
        for (int s = 16; s > 0; s >>= 1) acc = r.combine(acc, shfl_down_any(acc, s, 32));
      }
    }
    if (tx == 0 && o < g.num_outputs) emit(r, o, g.num_outputs, acc, partials);
  }
}

// Combines the `splits` partials of each output in order: a warp per output (block 32 x 8).
template <typename R>
__global__ void __launch_bounds__(256) finalize_kernel(R r, const typename R::acc_t* partials, int64_t num_outputs,
                                                       int64_t splits) {
  using acc_t = typename R::acc_t;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  acc_t acc = r.identity();
  if (o < num_outputs)
    for (int64_t s = threadIdx.x; s < splits; s += 32) acc = r.combine(acc, partials[s * num_outputs + o]);
  for (int s = 16; s > 0; s >>= 1) acc = r.combine(acc, shfl_down_any(acc, s, 32));
  if (threadIdx.x == 0 && o < num_outputs) r.write(o, acc);
}

// ---- planning and dispatch ------------------------------------------------------------------------

struct Config {
  bool column = false;
  int bx = 1, by = 1;
  int64_t grid_x = 1, splits = 1, chunk = 0;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

Config plan(const ReduceGeometry& g) {
  Config c;
  const int64_t O = g.num_outputs, R = g.reduce_numel;
  const int64_t red_inner = g.red_ndim > 0 ? g.red_strides[0][g.red_ndim - 1] : 0;
  const int64_t out_inner = g.out_ndim > 0 ? g.out_strides[0][g.out_ndim - 1] : 0;
  c.column = g.out_ndim > 0 && g.red_ndim > 0 && out_inner < red_inner;
  int lanes;
  if (c.column) {
    c.bx = 32;
    c.by = 8;
    c.grid_x = ceil_div(O, c.bx);
    lanes = c.by;
  } else {
    int64_t per = ceil_div(R, 4);
    per = per < 1 ? 1 : (per > 512 ? 512 : per);
    c.bx = pow2_ceil(per);
    c.by = c.bx >= 256 ? 1 : 256 / c.bx;
    c.grid_x = ceil_div(O, c.by);
    lanes = c.bx;
  }
  const int64_t target = 4 * static_cast<int64_t>(sm_count());
  if (c.grid_x < target && R > static_cast<int64_t>(lanes) * 32) {
    int64_t s = ceil_div(target, c.grid_x);
    const int64_t by_work = ceil_div(R, static_cast<int64_t>(lanes) * 32);
    s = s < by_work ? s : by_work;
    c.splits = s > 1024 ? 1024 : s;
  }
  c.chunk = R > 0 ? ceil_div(R, c.splits) : 0;
  c.splits = R > 0 ? ceil_div(R, c.chunk) : 1;
  return c;
}

template <typename R>
size_t workspace_for(const ReduceGeometry& g) {
  const Config c = plan(g);
  return c.splits > 1 ? static_cast<size_t>(c.splits * g.num_outputs) * sizeof(typename R::acc_t) : 0;
}

template <typename R>
void run(const R& r, const ReduceArgs& args, const ReduceGeometry& g, void* workspace, cudaStream_t stream) {
  using acc_t = typename R::acc_t;
  using T = typename R::in_t;
  if (g.num_outputs == 0) return;
  const Config c = plan(g);
  const dim3 block(c.bx, c.by);
  const dim3 grid(static_cast<unsigned>(c.grid_x), static_cast<unsigned>(c.splits));
  const size_t smem = static_cast<size_t>(c.bx) * c.by * sizeof(acc_t);
  acc_t* partials = c.splits > 1 ? static_cast<acc_t*>(workspace) : nullptr;
  reduce_kernel<R><<<grid, block, smem, stream>>>(g, r, static_cast<const T*>(args.in0),
                                                  static_cast<const T*>(args.in1), c.column, c.chunk, partials);
  if (c.splits > 1) {
    const dim3 fblock(32, 8);
    finalize_kernel<R><<<static_cast<unsigned>(ceil_div(g.num_outputs, 8)), fblock, 0, stream>>>(
        r, partials, g.num_outputs, c.splits);
  }
}

// Calls fn(reducer) with the reducer of args (op, dtypes, outputs).
template <typename Fn>
void visit_reducer(const ReduceArgs& a, Fn&& fn) {
  switch (a.op) {
    case ReduceOp::Sum:
    case ReduceOp::MulSum:
      dispatch_all(a.in_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const bool two = a.op == ReduceOp::MulSum;
        if constexpr (kFloating<T>) {
          if (two) fn(SumR<T, T, T, 2>{static_cast<T*>(a.out), a.scale});
          else fn(SumR<T, T, T, 1>{static_cast<T*>(a.out), a.scale});
        } else if (a.out_dtype == ScalarType::Int64) {
          if (two) fn(SumR<T, int64_t, int64_t, 2>{static_cast<int64_t*>(a.out), a.scale});
          else fn(SumR<T, int64_t, int64_t, 1>{static_cast<int64_t*>(a.out), a.scale});
        } else {
          if (two) fn(SumR<T, int64_t, T, 2>{static_cast<T*>(a.out), a.scale});
          else fn(SumR<T, int64_t, T, 1>{static_cast<T*>(a.out), a.scale});
        }
      });
      break;
    case ReduceOp::Var:
    case ReduceOp::Std:
      dispatch_floating(a.in_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        fn(VarR<T>{static_cast<T*>(a.out), a.ddof, a.op == ReduceOp::Std});
      });
      break;
    case ReduceOp::LogSumExp:
      dispatch_floating(a.in_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        fn(LogSumExpR<T>{static_cast<T*>(a.out)});
      });
      break;
    case ReduceOp::Max:
    case ReduceOp::Min:
      dispatch_all(a.in_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (a.op == ReduceOp::Max) fn(ExtremumR<T, true>{static_cast<T*>(a.out)});
        else fn(ExtremumR<T, false>{static_cast<T*>(a.out)});
      });
      break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin:
      dispatch_all(a.in_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (a.op == ReduceOp::ArgMax) fn(ArgExtremumR<T, true>{static_cast<T*>(a.out), a.indices});
        else fn(ArgExtremumR<T, false>{static_cast<T*>(a.out), a.indices});
      });
      break;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) select_backward_kernel(T* out, const T* grad, const int64_t* indices,
                                                                   int64_t outer, int64_t n, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / inner, j = k % inner;
    const int64_t idx = indices[k];
    if (idx < 0 || idx >= n) __trap();  // value_selecting_reduction_backward: index out of range
    out[(i * n + idx) * inner + j] = grad[k];
  }
}

}  // namespace

bool reduce_supports(const ReduceArgs& a) {
  const bool floating = a.in_dtype == ScalarType::Float32 || a.in_dtype == ScalarType::Float64;
  switch (a.op) {
    case ReduceOp::Var:
    case ReduceOp::Std:
    case ReduceOp::LogSumExp:
      return floating && a.out_dtype == a.in_dtype;
    case ReduceOp::Sum:
    case ReduceOp::MulSum:
      return a.out_dtype == a.in_dtype || (!floating && a.out_dtype == ScalarType::Int64);
    default:
      return a.out_dtype == a.in_dtype;
  }
}

size_t reduce_workspace_bytes(const ReduceArgs& args, const ReduceGeometry& g) {
  size_t bytes = 0;
  visit_reducer(args, [&](const auto& r) { bytes = workspace_for<std::decay_t<decltype(r)>>(g); });
  return bytes;
}

void launch_reduce(const ReduceArgs& args, const ReduceGeometry& g, void* workspace, cudaStream_t stream) {
  visit_reducer(args, [&](const auto& r) { run(r, args, g, workspace, stream); });
}

void launch_select_backward(ScalarType dtype, void* out, const void* grad, const int64_t* indices, int64_t outer,
                            int64_t n, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * inner;
  if (total == 0) return;
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    select_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(static_cast<T*>(out),
                                                                       static_cast<const T*>(grad), indices, outer, n,
                                                                       inner);
  });
}

}  // namespace qflow::cuda
