#pragma once
// Grid sizes shared by the kernels: grid-stride loops capped at a multiple of the device's
// multiprocessors (more blocks only add scheduling), for norm.cu, pool.cu and softmax_loss.cu.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace qflow::cuda {

/// Multiprocessors of the current device (cached per device; 100 when the query fails, leaving
/// no sticky error for the caller's launch check).
inline int num_sms() {
  static std::atomic<int> cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
  int n = cache[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      n = 100;
    }
    cache[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

/// Blocks of `threads_per_block` for `threads_wanted` threads of a grid-stride loop: at least
/// one, at most 32 per multiprocessor.
inline unsigned grid_blocks(int64_t threads_wanted, int threads_per_block) {
  const int64_t want = (threads_wanted + threads_per_block - 1) / threads_per_block;
  const int64_t cap = 32 * static_cast<int64_t>(num_sms());
  return static_cast<unsigned>(want < 1 ? 1 : (want > cap ? cap : want));
}

}  // namespace qflow::cuda
