// The fused SGD update: every parameter of a group in one launch (Note [Fused optimizer step]).
#include <cuda_runtime.h>

#include "kernels/optim.cuh"

namespace qflow::cuda {
namespace {

// The arithmetic of core's sgd_update_ (the per-parameter ops) element by element, in float.
__global__ void sgd_update_kernel(const SgdChunk* chunks, SgdHyper h) {
  const SgdChunk c = chunks[blockIdx.x];
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    const float p = c.param[i];
    float g = c.grad[i];
    if (h.weight_decay != 0.0f) g = g + h.weight_decay * p;
    if (h.momentum != 0.0f) {
      const float buf = h.first_step ? g : c.buffer[i] * h.momentum + (1.0f - h.dampening) * g;
      c.buffer[i] = buf;
      g = h.nesterov ? g + h.momentum * buf : buf;
    }
    c.param[i] = p + (-h.lr) * g;
  }
}

}  // namespace

void launch_sgd_update(const SgdChunk* chunks, int64_t count, SgdHyper h, cudaStream_t stream) {
  if (count == 0) return;
  sgd_update_kernel<<<static_cast<unsigned>(count), 256, 0, stream>>>(chunks, h);
}

}  // namespace qflow::cuda
