#pragma once
// Launchers of softmax / log_softmax (+ backward) and of the losses (nll_loss, cross_entropy,
// mse_loss, l1_loss, + backward) in cuda/kernels/softmax_loss.cu; plain header (Note [CUDA
// kernel files]). Registered by cuda/kernels/softmax_loss_ops.cpp.
//
// Note [Softmax and losses on the GPU]
// softmax sees its (contiguous) input as (outer, D, inner). inner == 1 (the classifier's
// last-dim case): a warp per row with the row in registers when D <= 1024, a block per row
// beyond; inner > 1: a thread per (outer, inner) lane stepping over D (coalesced across lanes).
// cross_entropy is fused: one kernel computes each position's log-softmax and its loss
// (label smoothing, class weights and ignore_index as the CPU), and its backward writes
// (softmax - onehot) * coefficient in one pass without materialising log-softmax. Every
// reduction to a scalar loss (sum, mean, the mean's total weight) is a fixed-order tree in
// double — no atomics — so repeated runs give bitwise identical losses and gradients.
// Targets are int64; the CPU refuses a target outside [0, C) (other than ignore_index), which
// the GPU cannot check without a copy to the host: there such a position gives a NaN loss and
// NaN gradients instead, so the error cannot go unnoticed.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qflow::cuda::sl {

enum class Scalar { F32, F64 };

/// x, y: contiguous (outer, D, inner).
void softmax_forward(Scalar s, bool log, const void* x, void* y, int64_t outer, int64_t D, int64_t inner,
                     cudaStream_t stream);
/// softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy). All contiguous.
void softmax_backward(Scalar s, bool log, const void* dy, const void* y, void* dx, int64_t outer, int64_t D,
                      int64_t inner, cudaStream_t stream);

/// Reductions as PyTorch's enum: 0 none, 1 mean, 2 sum.
struct ClassLoss {
  Scalar scalar = Scalar::F32;
  bool cross_entropy = false;  // log-softmax over the classes first (else self holds log-probabilities)
  const void* self = nullptr;  // contiguous (N, C, S)
  const int64_t* target = nullptr;  // contiguous (N, S)
  const void* weight = nullptr;     // contiguous (C,) or null
  int64_t N = 1, C = 1, S = 1;
  int reduction = 1;
  int64_t ignore_index = -100;
  double smoothing = 0.0;
  void* workspace = nullptr;  // class_loss_workspace_bytes()
};
size_t class_loss_workspace_bytes(int64_t positions);
/// out: (N, S) contiguous for reduction none, else a 0-d tensor.
void class_loss_forward(const ClassLoss& a, void* out, cudaStream_t stream);
/// grad: (N, S) contiguous for reduction none, else 0-d; dx: contiguous (N, C, S).
void class_loss_backward(const ClassLoss& a, const void* grad, void* dx, cudaStream_t stream);

/// mse_loss (l1 false) / l1_loss (l1 true) over n elements of two flat arrays.
size_t pointwise_workspace_bytes(int64_t n);
void pointwise_loss_forward(Scalar s, bool l1, const void* x, const void* y, int64_t n, int reduction, void* out,
                            void* workspace, cudaStream_t stream);
/// grad: n elements for reduction none, else one.
void pointwise_loss_backward(Scalar s, bool l1, const void* grad, const void* x, const void* y, void* dx, int64_t n,
                             int reduction, cudaStream_t stream);

}  // namespace qflow::cuda::sl
