#pragma once
// Launcher of random_crop_flip_normalize's CUDA kernel (augment.cu), registered by
// augment_ops.cpp (Note [Augmentation on the device], qflow/core/augment_ops.h). The draws and
// pixel arithmetic are crop_flip_draws.h's, the same header the CPU kernel compiles.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qflow/core/crop_flip_draws.h"

namespace qflow::cuda {

/// out (batch, C, out_h, out_w) float32 = sample indices[b] of images (n, C, H, W) uint8,
/// cropped, flipped and normalised with the draws of (seed, indices[b]). mean/std: float32
/// arrays of mean_len entries (1 or C) on the device, or null for no Normalize. An index
/// outside [0, n) stops the kernel with a device-side trap (surfacing at the next
/// synchronisation); nothing is read back to the host.
void launch_random_crop_flip_normalize(const augment::CropFlipParams& p, uint64_t seed, const uint8_t* images,
                                       int64_t n, const int64_t* indices, int64_t batch, const float* mean,
                                       const float* std, int64_t mean_len, float* out, cudaStream_t stream);

}  // namespace qflow::cuda
