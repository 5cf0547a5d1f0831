#pragma once
// Which share of every epoch a data-parallel rank loads.
//
// Note [Sharded epochs]
// Every rank builds the same epoch order (same seed, same epoch: Note [Deterministic loading])
// and keeps positions rank, rank + R, rank + 2R, ... of it (R replicas), as PyTorch's
// DistributedSampler. The shards are disjoint and together are the whole epoch; batch b of
// each rank holds positions [b·R·B, (b+1)·R·B) of the order, so R ranks with batch B see, step
// by step, exactly the samples one process with batch R·B sees, and each sample is augmented
// with the same random numbers (they depend on the dataset index, not on who loads it).
// Training pads the order by repeating its first positions up to a multiple of R, so every
// rank has the same number of samples, the same number of batches and the same last, short
// batch: ranks never wait for a step another rank does not take. Evaluation does not pad:
// each sample is counted once and the shards differ by at most one sample.
#include <cstdint>
#include <vector>

namespace qflow::data {

struct DistributedSampler {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  /// Pad to equal shards (training); false: each sample exactly once (evaluation).
  bool pad = true;

  /// Samples in this rank's share of an epoch of `n`.
  int64_t shard_size(int64_t n) const;
  /// This rank's share of `order`.
  std::vector<int64_t> shard(const std::vector<int64_t>& order) const;
  /// Throws naming the fields when num_replicas < 1 or rank is not in [0, num_replicas).
  void validate() const;
};

}  // namespace qflow::data
