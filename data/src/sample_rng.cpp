#include "qflow/data/sample_rng.h"

#include "qflow/core/error.h"
#include "qflow/core/generator.h"

namespace qflow::data {

SampleRng::SampleRng(uint64_t seed, uint64_t index)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}, index_(index) {}

uint32_t SampleRng::next_u32() {
  if (used_ == 4) {
    // Counter = (sample index, block number): every sample owns 2^32 blocks of its own.
    block_ = philox4x32({static_cast<uint32_t>(index_), static_cast<uint32_t>(index_ >> 32), block_counter_++, 0u},
                        key_);
    used_ = 0;
  }
  return block_[static_cast<size_t>(used_++)];
}

double SampleRng::uniform() { return static_cast<double>(next_u32()) * 0x1.0p-32; }

int64_t SampleRng::randint(int64_t low, int64_t high) {
  QFLOW_CHECK(low <= high, "SampleRng::randint: empty range [{}, {}]", low, high);
  const uint64_t range = static_cast<uint64_t>(high - low) + 1;
  QFLOW_CHECK(range <= (uint64_t{1} << 32), "SampleRng::randint: range [{}, {}] wider than 2^32", low, high);
  if (range == (uint64_t{1} << 32)) return low + next_u32();
  // Lemire's multiply-and-reject: exact uniformity without a division on the common path.
  uint64_t m = uint64_t{next_u32()} * range;
  if (static_cast<uint32_t>(m) < range) {
    const uint32_t threshold = static_cast<uint32_t>((uint64_t{1} << 32) % range);
    while (static_cast<uint32_t>(m) < threshold) m = uint64_t{next_u32()} * range;
  }
  return low + static_cast<int64_t>(m >> 32);
}

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace qflow::data
