#pragma once
// Launchers of the matrix products' own device code (cuda/kernels/linalg.cu); the products
// themselves are cuBLAS's (Note [cuBLAS matrix products] in linalg_ops.cpp). Plain header
// (Note [CUDA kernel files]).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qflow::cuda::linalg {

/// The element type of a launch: the products take float32 and float64.
enum class Elem { F32, F64 };

/// out[i, j] = scale * src[i * s0 + j * s1] for a row-major (rows, cols) out: addmm's `self`
/// broadcast to the product's shape (a stride is 0 along a broadcast dim) and scaled by beta.
void launch_broadcast_fill(Elem elem, const void* src, int64_t s0, int64_t s1, void* out, int64_t rows, int64_t cols,
                           double scale, cudaStream_t stream);

}  // namespace qflow::cuda::linalg
