#pragma once
// An epoch's order and augmentation seed (Note [Deterministic loading]), shared by DataLoader
// and DeviceDataLoader so that their epochs are the same by construction (internal to data).
#include <cstdint>
#include <vector>

#include "qflow/data/data_loader.h"

namespace qflow::data::detail {

struct EpochPlan {
  /// This rank's dataset indices in batch order (shuffled, sharded and padded per the options).
  std::vector<int64_t> order;
  /// The seed of every sample's SampleRng in this epoch (Note [Reproducible augmentation]).
  uint64_t transform_seed = 0;
};

/// Epoch `epoch` of a data set of `dataset_size` samples under `options` (shuffle, seed, sampler).
EpochPlan plan_epoch(int64_t dataset_size, const DataLoaderOptions& options, uint64_t epoch);
/// Batches per epoch (batch_size, drop_last, sampler).
int64_t batches_per_epoch(int64_t dataset_size, const DataLoaderOptions& options);

}  // namespace qflow::data::detail
