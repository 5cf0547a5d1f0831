#pragma once
// The dataset interface: a random-access collection of labelled images.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::data {

/// One sample: an image (C, H, W) — uint8 as stored, or float after a transform — and its
/// class index.
struct Example {
  Tensor image;
  int64_t label = 0;
};

/// A random-access dataset. get() must be safe to call from several threads at once: the
/// DataLoader's workers share one dataset.
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// Sample `index` in [0, size()). Images returned by the built-in datasets may share
  /// memory with the dataset: treat them as read-only (transforms never write in place).
  virtual Example get(int64_t index) const = 0;
  /// Class names; label i is class_names()[i].
  virtual const std::vector<std::string>& class_names() const = 0;

  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
};

/// The first `count` samples, or the samples at `indices`, of another dataset (quick runs on
/// a slice of a large dataset).
class Subset final : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  /// The first min(count, dataset->size()) samples.
  Subset(std::shared_ptr<const Dataset> dataset, int64_t count);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return dataset_->class_names(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

namespace detail {
/// Throws "<dataset>: index i out of range for a dataset of n samples" unless 0 <= i < n.
void check_index(const char* dataset, int64_t index, int64_t size);
}  // namespace detail

}  // namespace qflow::data
