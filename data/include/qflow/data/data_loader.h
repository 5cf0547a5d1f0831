#pragma once
// DataLoader: batches of transformed samples, optionally shuffled, produced by worker
// threads ahead of the training loop (a BatchLoader, batch_loader.h).
#include <cstdint>
#include <memory>
#include <optional>

#include "qflow/data/batch_loader.h"
#include "qflow/data/dataset.h"
#include "qflow/data/distributed_sampler.h"
#include "qflow/data/transform.h"

namespace qflow::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  /// Visit the samples in a random order, a new permutation each epoch (seed, epoch).
  bool shuffle = false;
  /// Seeds the permutation and the random transforms; see Note [Reproducible augmentation].
  uint64_t seed = 0;
  /// Drop the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  /// Threads producing batches; 0 produces them on the calling thread.
  int num_workers = 0;
  /// Batches each worker may have ready or in progress ahead of the consumer.
  int prefetch = 2;
  /// This rank's share of every epoch in data-parallel training (Note [Sharded epochs]);
  /// the default, one replica, is the whole epoch.
  DistributedSampler sampler = {};
  /// Applied to every sample (may be null). Samples still uint8 after it are scaled to [0, 1].
  TransformPtr transform = nullptr;
  /// Build batches in page-locked memory, for training on a GPU: `.to(cuda)` then queues a DMA
  /// copy and returns at once (Note [Pinned batches]). Needs a usable GPU.
  bool pin_memory = false;
};

// Note [Deterministic loading]
// An epoch is a fixed list of batches: batch b holds the samples at positions
// [b * batch_size, (b + 1) * batch_size) of the epoch's order (a Philox permutation of
// (seed, epoch) when shuffling), and each sample is transformed with the stream of
// (seed, epoch, dataset index). Workers claim batch numbers from a shared counter and put
// finished batches into a reorder window the consumer empties in batch order, so the batches
// are identical for any num_workers — only their arrival time changes. The window holds at
// most num_workers * prefetch batches, which bounds memory and lets workers stay ahead.
// An exception in a worker travels with its batch and is rethrown by the consumer when that
// batch is due, stopping the epoch.

class DataLoader final : public BatchLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  /// Stops and joins the workers, also in the middle of an epoch.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch.
  int64_t size() const override;
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

  /// The epoch the next begin() runs (it then advances by one, so a loop that never calls
  /// set_epoch still gets a new order each epoch). Call it to resume at epoch e.
  void set_epoch(uint64_t epoch) override;
  uint64_t epoch() const override { return next_epoch_; }

  /// Starts an epoch (cancelling any epoch in progress).
  void start_epoch() override;
  /// The next batch of the current epoch; nullopt once the epoch is over.
  std::optional<Batch> next() override;
  // begin()/end() (`for (Batch& b : loader)` runs one epoch): BatchLoader's.

 private:
  struct Epoch;
  void stop_epoch();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  uint64_t next_epoch_ = 0;
  std::unique_ptr<Epoch> epoch_;
};

}  // namespace qflow::data
