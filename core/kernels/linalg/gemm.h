#pragma once
// Matrix products over strided, possibly broadcast operands, through OpenBLAS for
// float32/float64 (internal to core's kernels; OpenBLAS never appears in a public header).
//
// Note [GEMM operand layouts]
// BLAS reads a matrix in place when it is row-major with a leading dimension (ld >= cols,
// unit column stride) or is the transpose of such a matrix (unit row stride): the latter
// is passed as CblasTrans with its own ld, so `a.t()`, `x.transpose(-1, -2)` and column
// slices of a contiguous matrix reach BLAS without a copy. Only matrices that are neither
// (e.g. both strides > 1, or a broadcast stride 0 inside the matrix) are copied, once,
// before their batch dims are expanded (blas_ready). Integer matrices skip BLAS and are
// read through their strides directly.
#include <cstdint>

#include "qflow/core/scalar.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels {

/// A strided matrix: element (i, j) at base + i * rs + j * cs (strides in elements).
struct MatView {
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
};

/// The last two dims of `t` as a MatView.
MatView mat_view(const Tensor& t);

/// True when BLAS can read `m` in place (see Note [GEMM operand layouts]).
bool blas_compatible(const MatView& m);

/// `x` itself, or a contiguous copy when the matrix in its last two dims is not
/// BLAS-compatible. Call it before expanding batch dims, so a copy never materialises a
/// broadcast. Integer tensors are returned as they are.
Tensor blas_ready(const Tensor& x);

/// out = beta * out + alpha * (a @ b) for every batch index.
///   a: (batch..., M, K), b: (batch..., K, N) — same batch shape as out, any strides
///   (stride 0 on broadcast batch dims); out: contiguous (batch..., M, N), same dtype.
/// beta == 0 ignores out's previous contents (they may be uninitialised).
/// Broadcast b with a foldable a runs as one (batch*M, K) @ (K, N) GEMM; small matrices are
/// multiplied in parallel over the batch, large ones one by one with threaded BLAS.
void batched_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, const Scalar& beta);

}  // namespace qflow::kernels
