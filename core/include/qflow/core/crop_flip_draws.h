#pragma once
// The per-sample arithmetic of random_crop_flip_normalize (augment_ops.h), shared by its CPU
// kernel (core/kernels/memory/augment.cpp) and its CUDA kernel (cuda/kernels/augment.cu): the draws
// data::RandomCrop and data::RandomHorizontalFlip take from data::SampleRng, and where an
// output pixel comes from. Plain C++17 with <cstdint> only, so nvcc compiles it inside device
// code (Note [CUDA kernel files]); one copy of the arithmetic for both devices is what keeps
// their batches equal bit for bit. data/src/sample_rng.cpp and data/src/transforms.cpp stay
// the reference: tests/data/augment_op_test.cpp compares this against them.
#include <cstdint>

#if defined(__CUDACC__)
#define QFLOW_HOST_DEVICE __host__ __device__
#else
#define QFLOW_HOST_DEVICE
#endif

namespace qflow::augment {

/// Philox4x32-10 of (counter, key): generator.cpp's philox4x32, word for word.
QFLOW_HOST_DEVICE inline void philox4x32(uint32_t (&c)[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, n3 = static_cast<uint32_t>(p0);
    c[0] = n0;
    c[1] = n1;
    c[2] = n2;
    c[3] = n3;
  }
}

/// data::SampleRng(seed, index) without its argument checks (the op checks its ranges once):
/// counter (index, block number), one Philox block per four words.
struct SampleStream {
  uint32_t k0, k1;
  uint64_t index;
  uint32_t block_counter = 0;
  uint32_t block[4] = {0, 0, 0, 0};
  int used = 4;

  QFLOW_HOST_DEVICE SampleStream(uint64_t seed, uint64_t index_)
      : k0(static_cast<uint32_t>(seed)), k1(static_cast<uint32_t>(seed >> 32)), index(index_) {}

  QFLOW_HOST_DEVICE uint32_t next_u32() {
    if (used == 4) {
      block[0] = static_cast<uint32_t>(index);
      block[1] = static_cast<uint32_t>(index >> 32);
      block[2] = block_counter++;
      block[3] = 0u;
      philox4x32(block, k0, k1);
      used = 0;
    }
    return block[used++];
  }
  /// SampleRng::uniform: [0, 1) at 32-bit resolution, in double.
  QFLOW_HOST_DEVICE double uniform() { return static_cast<double>(next_u32()) * 0x1.0p-32; }
  /// SampleRng::randint(0, high): Lemire's multiply-and-reject; high + 1 <= 2^32 (checked by the op).
  QFLOW_HOST_DEVICE int64_t randint0(int64_t high) {
    const uint64_t range = static_cast<uint64_t>(high) + 1;
    if (range == (uint64_t{1} << 32)) return static_cast<int64_t>(next_u32());
    uint64_t m = uint64_t{next_u32()} * range;
    if (static_cast<uint32_t>(m) < range) {
      const uint32_t threshold = static_cast<uint32_t>((uint64_t{1} << 32) % range);
      while (static_cast<uint32_t>(m) < threshold) m = uint64_t{next_u32()} * range;
    }
    return static_cast<int64_t>(m >> 32);
  }
};

/// The op's parameters, validated by its shape rule.
struct CropFlipParams {
  int64_t channels = 0, height = 0, width = 0;  // of the stored images
  int64_t out_h = 0, out_w = 0;                 // the crop (the image's size without one)
  int64_t padding = 0;
  uint8_t fill = 0;
  bool crop = false;        // a RandomCrop is in the pipeline (it draws even when nothing can move)
  bool flip = false;        // a RandomHorizontalFlip is in the pipeline (it always draws)
  bool flip_first = false;  // the flip comes before the crop in the Compose
  double flip_p = 0;
};

/// What one sample drew: the crop's corner in the padded image and whether it is mirrored.
struct SampleDraws {
  int64_t top = 0, left = 0;
  bool flipped = false;
};

/// The draws of sample `index` under `seed`, in the Compose's order: RandomCrop draws top then
/// left (randint over the padded image), RandomHorizontalFlip draws uniform() < p.
QFLOW_HOST_DEVICE inline SampleDraws draw_sample(const CropFlipParams& p, uint64_t seed, uint64_t index) {
  SampleStream rng(seed, index);
  SampleDraws d;
  if (p.flip && p.flip_first) d.flipped = rng.uniform() < p.flip_p;
  if (p.crop) {
    d.top = rng.randint0(p.height + 2 * p.padding - p.out_h);
    d.left = rng.randint0(p.width + 2 * p.padding - p.out_w);
  }
  if (p.flip && !p.flip_first) d.flipped = rng.uniform() < p.flip_p;
  return d;
}

/// The stored row of output row `y`, or -1 when it lies in the padding.
QFLOW_HOST_DEVICE inline int64_t source_row(const CropFlipParams& p, const SampleDraws& d, int64_t y) {
  const int64_t sy = d.top + y - p.padding;
  return sy >= 0 && sy < p.height ? sy : -1;
}

/// The stored column of output column `x`, or -1 when it lies in the padding. Crop then flip
/// mirrors the crop window (column out_w - 1 - x of it); flip then crop cuts the window from
/// the mirrored padded image (column width - 1 - sx of the stored one).
QFLOW_HOST_DEVICE inline int64_t source_col(const CropFlipParams& p, const SampleDraws& d, int64_t x) {
  const int64_t wx = d.flipped && !p.flip_first ? p.out_w - 1 - x : x;
  int64_t sx = d.left + wx - p.padding;
  if (sx < 0 || sx >= p.width) return -1;
  if (d.flipped && p.flip_first) sx = p.width - 1 - sx;
  return sx;
}

/// ToTensor then Normalize on one pixel, with their float32 arithmetic in their order:
/// float(v) / 255 (a division, as ToTensor divides), then (x - mean) / std.
QFLOW_HOST_DEVICE inline float to_unit(uint8_t v) { return static_cast<float>(v) / 255.0f; }
QFLOW_HOST_DEVICE inline float normalized(uint8_t v, float mean, float std) { return (to_unit(v) - mean) / std; }

}  // namespace qflow::augment
