// Device code of the convolutions (launchers declared in conv.cuh): NCHW ↔ channels-last
// transposes, the bias + ReLU epilogue and the bias gradient. The convolutions are cuDNN's
// (Note [cuDNN convolutions] in conv_ops.cpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/conv.cuh"

namespace qflow::cuda::conv {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridYZ = 65535;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Blocks for a grid-stride loop over n items: enough to fill the GPU a few times over.
unsigned grid_for(int64_t n) { return static_cast<unsigned>(max64(1, min64(ceil_div(n, kThreads), 65536))); }

// ---- transpose ---------------------------------------------------------------------------------

constexpr int kTile = 32;
constexpr int kTileRows = 8;  // blockDim.y: each thread moves kTile / kTileRows elements per tile

// out[b, s, r] = in[b, r, s]. One 32 x 32 tile per block iteration, staged in shared memory
// (padded by one column: no bank conflicts on the transposed read). Loops depend on blockIdx
// only, so every thread of a block reaches the same __syncthreads.
template <typename T>
__global__ void transpose_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t batch, int64_t rows,
                                 int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T* src = in + b * rows * cols;
    T* dst = out + b * rows * cols;
    for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      for (int64_t ct = blockIdx.x; ct < col_tiles; ct += gridDim.x) {
        const int64_t r0 = rt * kTile, c0 = ct * kTile;
        for (int k = ty; k < kTile; k += kTileRows) {
          const int64_t r = r0 + k, c = c0 + tx;
          if (r < rows && c < cols) tile[k][tx] = src[r * cols + c];
        }
        __syncthreads();
        for (int k = ty; k < kTile; k += kTileRows) {
          const int64_t c = c0 + k, r = r0 + tx;
          if (c < cols && r < rows) dst[c * rows + r] = tile[tx][k];
        }
        __syncthreads();
      }
    }
  }
}

template <typename T>
void transpose(const T* in, T* out, int64_t batch, int64_t rows, int64_t cols, cudaStream_t stream) {
  const dim3 block(kTile, kTileRows);
  const dim3 grid(static_cast<unsigned>(min64(ceil_div(cols, kTile), kMaxGridX)),
                  static_cast<unsigned>(min64(ceil_div(rows, kTile), kMaxGridYZ)),
                  static_cast<unsigned>(min64(batch, kMaxGridYZ)));
  transpose_kernel<T><<<grid, block, 0, stream>>>(in, out, batch, rows, cols);
}

// ---- bias + ReLU epilogue ------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T relu_fn(T x) {
  return x < T(0) ? T(0) : x;  // as the CPU's relu_fn: NaN propagates
}

template <typename T, bool kBias, bool kRelu>
__global__ void bias_act_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t n, int64_t channels,
                                int64_t inner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T v = y[i];
    if (kBias) v += bias[(i / inner) % channels];
    if (kRelu) v = relu_fn(v);
    y[i] = v;
  }
}

// float32, four elements per thread with 128-bit loads and stores. Channels-last (inner == 1)
// needs channels % 4 == 0, so the four elements are channels c..c+3 of one pixel; NCHW needs
// inner % 4 == 0, so they share one channel.
template <bool kBias, bool kRelu>
__global__ void bias_act_vec4_kernel(float4* __restrict__ y, const float* __restrict__ bias, int64_t n4,
                                     int64_t channels, int64_t inner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += step) {
    float4 v = y[i];
    if (kBias) {
      const int64_t e = i * 4;
      if (inner == 1) {
        const int64_t c = e % channels;
        v.x += bias[c];
        v.y += bias[c + 1];
        v.z += bias[c + 2];
        v.w += bias[c + 3];
      } else {
        const float b = bias[(e / inner) % channels];
        v.x += b;
        v.y += b;
        v.z += b;
        v.w += b;
      }
    }
    if (kRelu) {
      v.x = relu_fn(v.x);
      v.y = relu_fn(v.y);
      v.z = relu_fn(v.z);
      v.w = relu_fn(v.w);
    }
    y[i] = v;
  }
}

template <typename T, bool kBias, bool kRelu>
void bias_act_scalar(T* y, const T* bias, int64_t n, int64_t channels, int64_t inner, cudaStream_t stream) {
  bias_act_kernel<T, kBias, kRelu><<<grid_for(n), kThreads, 0, stream>>>(y, bias, n, channels, inner);
}

template <typename T, bool kBias, bool kRelu>
void bias_act(T* y, const T* bias, int64_t n, int64_t channels, int64_t inner, cudaStream_t stream) {
  if constexpr (sizeof(T) == sizeof(float)) {
    const bool aligned = reinterpret_cast<uintptr_t>(y) % 16 == 0;
    const bool groups_of_4 = inner == 1 ? channels % 4 == 0 : inner % 4 == 0;
    if (aligned && groups_of_4 && n % 4 == 0) {
      const int64_t n4 = n / 4;
      bias_act_vec4_kernel<kBias, kRelu><<<grid_for(n4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(y), bias,
                                                                               n4, channels, inner);
      return;
    }
  }
  bias_act_scalar<T, kBias, kRelu>(y, bias, n, channels, inner, stream);
}

template <typename T>
void bias_act_dispatch(T* y, const T* bias, bool relu, int64_t n, int64_t channels, int64_t inner,
                       cudaStream_t stream) {
  if (n == 0) return;
  if (bias && relu) return bias_act<T, true, true>(y, bias, n, channels, inner, stream);
  if (bias) return bias_act<T, true, false>(y, bias, n, channels, inner, stream);
  if (relu) return bias_act<T, false, true>(y, bias, n, channels, inner, stream);
}

// ---- bias gradient ---------------------------------------------------------------------------

// How the reduction is split: blocks of the first stage along the reduced axis. Enough blocks
// to keep the GPU busy (about 512 in all), each reducing at least 64 rows / 4096 elements.
struct Split {
  int64_t splits = 1;
  int64_t per_split = 0;  // rows (channels-last) or flattened (outer, inner) elements (NCHW)
};

constexpr int kRowTileC = 32;  // channels per block, channels-last stage 1
constexpr int kRowPhases = 8;  // rows read at once per block (blockDim.y)

Split split_for(int64_t outer, int64_t channels, int64_t inner) {
  Split s;
  if (inner == 1) {
    const int64_t channel_tiles = ceil_div(channels, kRowTileC);
    const int64_t by_occupancy = max64(1, 512 / max64(channel_tiles, 1));
    s.splits = max64(1, min64(by_occupancy, ceil_div(outer, 64)));
    s.per_split = ceil_div(outer, s.splits);
  } else {
    const int64_t total = outer * inner;
    const int64_t by_occupancy = max64(1, 512 / max64(channels, 1));
    s.splits = max64(1, min64(by_occupancy, ceil_div(total, 4096)));
    s.per_split = ceil_div(total, s.splits);
  }
  if (s.per_split > 0) s.splits = max64(1, ceil_div(inner == 1 ? outer : outer * inner, s.per_split));
  s.splits = min64(s.splits, kMaxGridYZ);
  return s;
}

// Channels-last stage 1: block (32, 8) covers 32 channels; a warp reads 32 consecutive
// channels of one row (coalesced). partial[split, c] = sum of rows [split * per, +per).
template <typename T>
__global__ void bias_grad_rows_kernel(const T* __restrict__ gy, T* __restrict__ partial, int64_t rows,
                                      int64_t channels, int64_t per_split) {
  __shared__ T sums[kRowPhases][kRowTileC + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kRowTileC + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_split;
  const int64_t end = min64(rows, begin + per_split);
  T acc = T(0);
  if (c < channels)
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowPhases) acc += gy[r * channels + c];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    T s = T(0);
    for (int k = 0; k < kRowPhases; ++k) s += sums[k][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * channels + c] = s;
  }
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// NCHW stage 1: block (c, split) sums channel c over flattened (outer, inner) positions
// [split * per, +per); warp shuffles, then the warps' sums in shared memory.
template <typename T>
__global__ void bias_grad_planes_kernel(const T* __restrict__ gy, T* __restrict__ partial, int64_t outer,
                                        int64_t channels, int64_t inner, int64_t per_split) {
  __shared__ T warp_sums[kThreads / 32];
  const int64_t c = blockIdx.x;
  const int64_t total = outer * inner;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * per_split;
  const int64_t end = min64(total, begin + per_split);
  T acc = T(0);
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    acc += gy[(o * channels + c) * inner + i];
  }
  acc = warp_sum(acc);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    T s = lane < kThreads / 32 ? warp_sums[lane] : T(0);
    s = warp_sum(s);
    if (lane == 0) partial[static_cast<int64_t>(blockIdx.y) * channels + c] = s;
  }
}

// Stage 2: gb[c] = sum over splits of partial[split, c], in split order.
template <typename T>
__global__ void bias_grad_finish_kernel(const T* __restrict__ partial, T* __restrict__ gb, int64_t splits,
                                        int64_t channels) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += step) {
    T s = T(0);
    for (int64_t k = 0; k < splits; ++k) s += partial[k * channels + c];
    gb[c] = s;
  }
}

template <typename T>
void bias_grad(const T* gy, T* gb, int64_t outer, int64_t channels, int64_t inner, void* workspace,
               cudaStream_t stream) {
  if (channels == 0) return;
  const Split s = split_for(outer, channels, inner);
  T* partial = static_cast<T*>(workspace);
  if (inner == 1) {
    const dim3 block(kRowTileC, kRowPhases);
    const dim3 grid(static_cast<unsigned>(ceil_div(channels, kRowTileC)), static_cast<unsigned>(s.splits));
    bias_grad_rows_kernel<T><<<grid, block, 0, stream>>>(gy, partial, outer, channels, s.per_split);
  } else {
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(s.splits));
    bias_grad_planes_kernel<T><<<grid, kThreads, 0, stream>>>(gy, partial, outer, channels, inner, s.per_split);
  }
  bias_grad_finish_kernel<T><<<grid_for(channels), kThreads, 0, stream>>>(partial, gb, s.splits, channels);
}

}  // namespace

void launch_transpose(Elem elem, const void* in, void* out, int64_t batch, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  const int64_t n = batch * rows * cols;
  if (n == 0) return;
  const size_t esize = elem == Elem::F32 ? sizeof(float) : sizeof(double);
  if (rows == 1 || cols == 1) {  // the same bytes in the same order
    cudaMemcpyAsync(out, in, static_cast<size_t>(n) * esize, cudaMemcpyDeviceToDevice, stream);
    return;
  }
  if (elem == Elem::F32)
    transpose(static_cast<const float*>(in), static_cast<float*>(out), batch, rows, cols, stream);
  else
    transpose(static_cast<const double*>(in), static_cast<double*>(out), batch, rows, cols, stream);
}

void launch_bias_act(Elem elem, void* y, const void* bias, bool relu, int64_t outer, int64_t channels, int64_t inner,
                     cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (elem == Elem::F32)
    bias_act_dispatch(static_cast<float*>(y), static_cast<const float*>(bias), relu, n, channels, inner, stream);
  else
    bias_act_dispatch(static_cast<double*>(y), static_cast<const double*>(bias), relu, n, channels, inner, stream);
}

size_t bias_grad_workspace_bytes(Elem elem, int64_t outer, int64_t channels, int64_t inner) {
  const Split s = split_for(outer, channels, inner);
  return static_cast<size_t>(s.splits * channels) * (elem == Elem::F32 ? sizeof(float) : sizeof(double));
}

void launch_bias_grad(Elem elem, const void* gy, void* gb, int64_t outer, int64_t channels, int64_t inner,
                      void* workspace, cudaStream_t stream) {
  if (elem == Elem::F32)
    bias_grad(static_cast<const float*>(gy), static_cast<float*>(gb), outer, channels, inner, workspace, stream);
  else
    bias_grad(static_cast<const double*>(gy), static_cast<double*>(gb), outer, channels, inner, workspace, stream);
}

}  // namespace qflow::cuda::conv
