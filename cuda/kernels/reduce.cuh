#pragma once
// Launchers of the reduction kernels (reduce.cu), registered by reduce_ops.cpp: sum, mean,
// var, std, logsumexp, sum_to, mul_sum_to, max/min (all, dim), argmax/argmin, amax/amin.
//
// Note [CUDA reductions]
// A reduction sees its input as (outputs O) x (reduced positions R): the kept dims in logical
// order (the output is row-major in them) and the reduced dims, each group collapsed where
// memory allows (make_reduce_geometry). One kernel does the whole reduction, in one of two
// schedules chosen by where the smaller stride is:
//  * rows: the reduced positions are the contiguous ones (sum over the last dim, the (N, HW)
//    positions of a row-major (N, C, H, W) tensor per channel): a team of bx threads (a
//    power of two, up to 512) walks each output's positions with coalesced loads, then
//    combines with warp shuffles and, across warps, shared memory;
//  * columns: adjacent outputs are adjacent in memory (a channels-last (N, C, H, W) tensor
//    reduced to its C channels, the batch sum of an (N, C) gradient): 32 adjacent outputs
//    per block along x, 8 threads along y splitting the positions, combined in shared memory.
// When the outputs alone cannot fill the GPU, the positions are also split across blocks
// (grid.y): each writes a partial accumulator to a workspace, and a second small kernel
// combines the partials of each output in order (no atomics: results are reproducible run
// to run). Accumulation: float in float, double in double, integers in int64; variance by
// Welford's update and Chan's combination; logsumexp by the online (max, scaled sum) pair;
// arg-reductions break ties by the smaller position, so the first extremum (first NaN) wins
// as on the CPU.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/strided.cuh"

namespace qflow::cuda {

enum class ReduceOp : int {
  Sum,        // out = sum * scale (mean: scale = 1/R); out dtype: in's, or int64 (sum of integers)
  MulSum,     // out = sum(in0 * in1), the product rounded to the input dtype first (mul_sum_to)
  Var, Std,   // Welford; divisor R - ddof
  LogSumExp,  // floating
  Max, Min,   // values only (amax, max.all)
  ArgMax, ArgMin,  // values (optional) and int64 indices: positions in the reduced dims' row-major order
};

struct ReduceGeometry {
  int ninputs = 1;
  int64_t num_outputs = 1;   // O
  int64_t reduce_numel = 1;  // R
  int out_ndim = 0;          // collapsed kept dims, outermost first
  int red_ndim = 0;          // collapsed reduced dims, outermost first
  int64_t out_sizes[kMaxDims] = {};
  int64_t red_sizes[kMaxDims] = {};
  int64_t out_strides[2][kMaxDims] = {};  // per input, in elements
  int64_t red_strides[2][kMaxDims] = {};
};

/// Plans reducing inputs of logical shape sizes[0, ndim) with element strides strides[k] over
/// the dims where reduced[d] is true (Note [CUDA reductions]). keep_order: the reduced dims
/// keep their logical order (positions count in row-major order, for the arg-reductions);
/// otherwise they are ordered by input 0's strides so the innermost is the smallest.
/// Returns false when a group keeps more than kMaxDims dims after collapsing.
inline bool make_reduce_geometry(ReduceGeometry& g, int ndim, const int64_t* sizes, int ninputs,
                                 const int64_t* const* strides, const bool* reduced, bool keep_order) {
  g = ReduceGeometry{};
  g.ninputs = ninputs;
  for (int group = 0; group < 2; ++group) {  // 0: kept, 1: reduced
    const bool want = group == 1;
    int order[64];
    int n = 0;
    int64_t count = 1;
    for (int d = 0; d < ndim && d < 64; ++d) {
      if (reduced[d] != want) continue;
      count *= sizes[d];
      if (sizes[d] != 1) order[n++] = d;
    }
    if (want && !keep_order) {  // stable insertion sort, largest stride of input 0 first
      for (int i = 1; i < n; ++i) {
        const int d = order[i];
        int j = i;
        while (j > 0 && strides[0][d] > strides[0][order[j - 1]]) {
          order[j] = order[j - 1];
          --j;
        }
        order[j] = d;
      }
    }
    int64_t cs[64];
    int64_t cst[2][64];
    int m = 0;
    for (int i = 0; i < n; ++i) {
      const int d = order[i];
      if (m > 0) {
        bool mergeable = true;
        for (int k = 0; k < ninputs; ++k)
          if (cst[k][m - 1] != strides[k][d] * sizes[d]) mergeable = false;
        if (mergeable) {
          cs[m - 1] *= sizes[d];
          for (int k = 0; k < ninputs; ++k) cst[k][m - 1] = strides[k][d];
          continue;
        }
      }
      cs[m] = sizes[d];
      for (int k = 0; k < ninputs; ++k) cst[k][m] = strides[k][d];
      ++m;
    }
    if (m > kMaxDims) return false;
    if (want) {
      g.reduce_numel = count;
      g.red_ndim = m;
      for (int i = 0; i < m; ++i) {
        g.red_sizes[i] = cs[i];
        for (int k = 0; k < ninputs; ++k) g.red_strides[k][i] = cst[k][i];
      }
    } else {
      g.num_outputs = count;
      g.out_ndim = m;
      for (int i = 0; i < m; ++i) {
        g.out_sizes[i] = cs[i];
        for (int k = 0; k < ninputs; ++k) g.out_strides[k][i] = cst[k][i];
      }
    }
  }
  return true;
}

struct ReduceArgs {
  ReduceOp op = ReduceOp::Sum;
  ScalarType in_dtype = ScalarType::Float32;
  ScalarType out_dtype = ScalarType::Float32;  // Sum: in_dtype or Int64; others: in_dtype
  void* out = nullptr;                 // values (may be null for ArgMax/ArgMin)
  int64_t* indices = nullptr;          // ArgMax/ArgMin
  const void* in0 = nullptr;           // element 0 of each input
  const void* in1 = nullptr;           // MulSum's second factor
  double scale = 1.0;                  // Sum
  double ddof = 1.0;                   // Var/Std
};

/// Whether a kernel exists for (op, input dtype, output dtype).
bool reduce_supports(const ReduceArgs& args);
/// Bytes of device workspace launch_reduce needs for these arguments (0: none).
size_t reduce_workspace_bytes(const ReduceArgs& args, const ReduceGeometry& g);
/// Queues the reduction on `stream`; `workspace` holds reduce_workspace_bytes(args, g) bytes.
void launch_reduce(const ReduceArgs& args, const ReduceGeometry& g, void* workspace, cudaStream_t stream);

/// value_selecting_reduction_backward: out (contiguous (outer, n, inner), already zeroed) gets
/// grad[k] at position indices[k] along the middle dim; grad and indices contiguous
/// (outer, inner). An index outside [0, n) stops the kernel with a device-side trap (the
/// error surfaces at the next synchronisation).
void launch_select_backward(ScalarType dtype, void* out, const void* grad, const int64_t* indices, int64_t outer,
                            int64_t n, int64_t inner, cudaStream_t stream);

}  // namespace qflow::cuda
