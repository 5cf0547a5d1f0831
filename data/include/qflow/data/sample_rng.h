#pragma once
// Per-sample random numbers for data augmentation.
//
// Note [Reproducible augmentation]
// A random transform draws from a SampleRng built from (epoch seed, dataset index): a Philox
// stream keyed by the seed whose counter starts at the index. What a sample looks like in an
// epoch therefore depends only on those two numbers — not on the worker thread that handles
// it, the order workers run in, the batch size or the number of workers — and resuming at
// epoch e reproduces epoch e exactly.
#include <array>
#include <cstdint>

namespace qflow::data {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t index);

  /// The next 32 random bits of this sample's stream.
  uint32_t next_u32();
  /// Uniform in [0, 1) (32-bit resolution).
  double uniform();
  /// Uniform integer in [low, high], both inclusive (unbiased).
  int64_t randint(int64_t low, int64_t high);

 private:
  std::array<uint32_t, 2> key_;
  uint64_t index_;
  uint32_t block_counter_ = 0;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;
};

/// Mixes a seed with a stream number (the epoch, a purpose tag) into a new, well-spread seed
/// (splitmix64 finaliser), so epochs and purposes get unrelated streams.
uint64_t mix_seed(uint64_t seed, uint64_t stream);

}  // namespace qflow::data
