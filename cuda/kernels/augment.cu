// random_crop_flip_normalize's kernel (augment.cuh): one thread per output element, each
// recomputing its sample's draws. A sample's draws are one Philox block (a second only on a
// rare Lemire rejection), cheaper than a pass that stores them and a second launch reading
// them back; and the output is written in its row-major order, so a warp's stores coalesce.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/augment.cuh"
#include "kernels/strided.cuh"

namespace qflow::cuda {
namespace {

__global__ void __launch_bounds__(kThreads)
    crop_flip_normalize_kernel(augment::CropFlipParams p, uint64_t seed, const uint8_t* __restrict__ images, int64_t n,
                               const int64_t* __restrict__ indices, int64_t batch, const float* __restrict__ mean,
                               const float* __restrict__ std, int64_t mean_len, float* __restrict__ out) {
  const int64_t out_plane = p.out_h * p.out_w, sample_size = p.channels * out_plane;
  const int64_t total = batch * sample_size;
  const int64_t plane = p.height * p.width;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = k / sample_size;
    const int64_t r = k - b * sample_size;
    const int64_t c = r / out_plane;
    const int64_t yx = r - c * out_plane;
    const int64_t y = yx / p.out_w, x = yx - y * p.out_w;
    const int64_t index = indices[b];
    if (index < 0 || index >= n) __trap();  // random_crop_flip_normalize: index out of range
    const augment::SampleDraws d = augment::draw_sample(p, seed, static_cast<uint64_t>(index));
    const int64_t sy = augment::source_row(p, d, y), sx = augment::source_col(p, d, x);
    const uint8_t v = sy < 0 || sx < 0 ? p.fill : images[(index * p.channels + c) * plane + sy * p.width + sx];
    if (mean != nullptr) {
      const int64_t m = mean_len == 1 ? 0 : c;
      out[k] = augment::normalized(v, mean[m], std[m]);
    } else {
      out[k] = augment::to_unit(v);
    }
  }
}

}  // namespace

void launch_random_crop_flip_normalize(const augment::CropFlipParams& p, uint64_t seed, const uint8_t* images,
                                       int64_t n, const int64_t* indices, int64_t batch, const float* mean,
                                       const float* std, int64_t mean_len, float* out, cudaStream_t stream) {
  const int64_t total = batch * p.channels * p.out_h * p.out_w;
  if (total == 0) return;
  crop_flip_normalize_kernel<<<grid_for(total), kThreads, 0, stream>>>(p, seed, images, n, indices, batch, mean, std,
                                                                       mean_len, out);
}

}  // namespace qflow::cuda
