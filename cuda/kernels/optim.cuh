#pragma once
// Launcher of the fused SGD update (optim.cu), registered by optim_ops.cpp.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qflow::cuda {

/// A slice of one parameter: `n` float32 elements from each pointer (buffer null without momentum).
struct SgdChunk {
  float* param;
  const float* grad;
  float* buffer;
  int64_t n;
};

struct SgdHyper {
  float lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
};

/// Elements per chunk: one thread block updates one chunk.
inline constexpr int64_t kSgdChunk = 64 * 1024;

/// Updates every chunk of `chunks` (a table in device memory, `count` entries) in one launch.
void launch_sgd_update(const SgdChunk* chunks, int64_t count, SgdHyper h, cudaStream_t stream);

}  // namespace qflow::cuda
