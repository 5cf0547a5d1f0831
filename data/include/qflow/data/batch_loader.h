#pragma once
// What a training loop needs from a loader: epochs of batches. DataLoader (data_loader.h) makes
// them on the CPU; DeviceDataLoader (device_data_loader.h) on the device that holds the data set.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "qflow/core/tensor.h"

namespace qflow::data {

/// A batch: images (N, C, H, W) float32 and labels (N) int64.
struct Batch {
  Tensor images;
  Tensor labels;
  int64_t size() const { return labels.defined() ? labels.numel() : 0; }
};

/// An epoch-based source of batches; both loaders implement it with the same semantics
/// (Note [Deterministic loading]), so a loop written against it runs with either.
class BatchLoader {
 public:
  virtual ~BatchLoader() = default;

  /// Batches per epoch.
  virtual int64_t size() const = 0;
  /// The epoch the next start_epoch() runs (it then advances by one, so a loop that never
  /// calls set_epoch still gets a new order each epoch). Call it to resume at epoch e.
  virtual void set_epoch(uint64_t epoch) = 0;
  virtual uint64_t epoch() const = 0;
  /// Starts an epoch (cancelling any epoch in progress).
  virtual void start_epoch() = 0;
  /// The next batch of the current epoch; nullopt once the epoch is over.
  virtual std::optional<Batch> next() = 0;

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(BatchLoader* loader);
    Batch& operator*() { return batch_; }
    Batch* operator->() { return &batch_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return loader_ == other.loader_; }

   private:
    BatchLoader* loader_ = nullptr;
    Batch batch_;
  };
  /// `for (Batch& b : loader)` runs one epoch.
  Iterator begin() { return Iterator(this); }
  Iterator end() { return Iterator(); }
};

}  // namespace qflow::data
