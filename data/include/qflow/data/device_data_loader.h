#pragma once
// DeviceDataLoader: DataLoader's batches made on the device that holds the whole data set.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "qflow/core/augment_ops.h"
#include "qflow/core/device.h"
#include "qflow/data/batch_loader.h"
#include "qflow/data/data_loader.h"

namespace qflow::data {

// Note [Data on the device]
// Training on a GPU from a DataLoader decodes, augments and copies every batch on the host.
// A data set that fits on the device can instead live there: DeviceDataLoader reads every
// sample once, as the uint8 (C, H, W) images the data sets store, uploads them (N, C, H, W)
// with the labels once, and makes each batch with one random_crop_flip_normalize call on a
// slice of the epoch's index list plus an index_select of the labels (Note [Augmentation on
// the device]) — no host copy per step; the index list is uploaded once per epoch. The epoch
// (order, shard, padding, last batch, per-sample seeds) comes from the function DataLoader uses
// (data/src/epoch_plan.h), and the op draws what the CPU transforms draw, so its batches equal
// DataLoader's bit for bit on any device (the CPU included). It runs exactly the pipelines
//   Compose([RandomCrop(size, padding, fill)], [RandomHorizontalFlip(p)], [ToTensor()], [Normalize(mean, std)])
// — crop and flip optional and in either order, before ToTensor (on the uint8 image), a
// CHW ToTensor, Normalize only after it — as well as no transform at all, and refuses any other
// transform, naming it. Loader options that only shape the CPU's work (num_workers, prefetch,
// pin_memory) are ignored.

class DeviceDataLoader final : public BatchLoader {
 public:
  /// Reads and uploads `dataset` to `device`; throws qflow::Error when the data set is empty,
  /// its images are not uint8 (C, H, W) of one shape, a label is out of range, or the
  /// transform is not one the device can run (the message names the transform).
  DeviceDataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, Device device);

  /// Why `dataset` with `transform` cannot be loaded onto a device (the error the constructor
  /// would give), or "" when it can. Reads sample 0 only.
  static std::string unsupported_reason(const Dataset& dataset, const Transform* transform);
  /// Device bytes the data set takes once loaded (images and labels), from sample 0's shape.
  /// 0 for an empty data set.
  static int64_t bytes_needed(const Dataset& dataset);

  int64_t size() const override;
  void set_epoch(uint64_t epoch) override { next_epoch_ = epoch; }
  uint64_t epoch() const override { return next_epoch_; }
  void start_epoch() override;
  std::optional<Batch> next() override;

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  Device device() const { return device_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  Device device_;
  Tensor images_;  // (N, C, H, W) uint8 on device_
  Tensor labels_;  // (N) int64 on device_
  CropFlipNormalizeOptions augment_;
  Tensor mean_, std_;  // float32 (C) or (1) on device_, or undefined (no Normalize)
  uint64_t next_epoch_ = 0;
  // The epoch in progress.
  bool in_epoch_ = false;
  Tensor order_;  // this epoch's indices (int64) on device_
  uint64_t transform_seed_ = 0;
  int64_t next_batch_ = 0, num_batches_ = 0;
};

}  // namespace qflow::data
