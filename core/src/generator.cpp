// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator of Random123 and curand, and the per-thread current generator.
#include "qflow/core/generator.h"

namespace qflow {

namespace {

// Multipliers and Weyl key increments of Philox4x32 (Random123's PHILOX_M4x32_* and
// PHILOX_W32_*); changing any of them breaks the known-answer tests and every saved seed.
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

// PyTorch's default seed, so an unseeded program is still reproducible run to run.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

// Note [Passing the generator]
// Random ops do not take a Generator argument: a schema holds values a graph can record and
// replay, and a generator is mutable state. The typed API installs the caller's generator
// with a GeneratorGuard around the dispatcher call and the kernel reads current_generator().
// The slot is thread-local so data-loader threads drawing with their own generators never
// see each other's.
thread_local Generator* t_current = nullptr;

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return counter;
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}, key());
}

Generator& default_generator() {
  static Generator gen(kDefaultSeed);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

Generator& current_generator() { return t_current != nullptr ? *t_current : default_generator(); }

GeneratorGuard::GeneratorGuard(Generator* gen) : previous_(t_current) {
  if (gen != nullptr) t_current = gen;
}

GeneratorGuard::~GeneratorGuard() { t_current = previous_; }

}  // namespace qflow
