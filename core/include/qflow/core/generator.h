#pragma once
// Counter-based random numbers (Philox 4x32-10): element i of a draw depends only on
// (seed, offset + i), so results do not depend on the machine or the thread count, and the
// whole state is two integers that a checkpoint can save.
#include <array>
#include <cstdint>

namespace qflow {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}

  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  /// Number of 128-bit blocks consumed so far.
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }

  /// Reserves `blocks` consecutive Philox blocks and returns the first block index.
  uint64_t reserve(uint64_t blocks) { uint64_t o = offset_; offset_ += blocks; return o; }
  /// The four 32-bit outputs of block `index` for this generator's seed.
  std::array<uint32_t, 4> block(uint64_t index) const;
  /// The Philox key (the seed split into two words); block(i) = philox4x32({lo(i), hi(i), 0, 0}, key()).
  std::array<uint32_t, 2> key() const { return {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)}; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide default generator.
Generator& default_generator();
/// Seeds the default generator.
void manual_seed(uint64_t seed);

/// The generator random kernels draw from on this thread: the one installed by the innermost
/// GeneratorGuard, else the default generator. See Note [Passing the generator].
Generator& current_generator();

/// Makes `gen` the current generator of this thread for the guard's lifetime (nullptr keeps
/// the current one: the default generator unless an outer guard installed another). Typed random functions wrap their dispatcher call in one, because
/// a generator is state, not an op argument: a recorded graph node re-run by name draws from
/// whatever generator is current then.
class GeneratorGuard {
 public:
  explicit GeneratorGuard(Generator* gen);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator* previous_;
};

/// Philox4x32-10 of (counter, key); exposed for kernels that generate in parallel.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

}  // namespace qflow
