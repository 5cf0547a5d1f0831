#pragma once
// The transform interface and Compose. Concrete transforms: transforms.h.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/tensor.h"
#include "qflow/data/sample_rng.h"

namespace qflow::data {

/// A function from one image (C, H, W) to another. Transforms are immutable and never write
/// into their input (it may be a view into a dataset's buffer), so one instance serves all
/// loader workers at once. Random transforms draw from the sample's SampleRng; see
/// Note [Reproducible augmentation].
class Transform {
 public:
  virtual ~Transform() = default;
  virtual Tensor apply(const Tensor& image, SampleRng& rng) const = 0;
  /// PyTorch-style description: "RandomCrop(size=(32, 32), padding=4)".
  virtual std::string repr() const = 0;

  /// apply() with the stream of sample `index` under `seed`.
  Tensor operator()(const Tensor& image, uint64_t seed = 0, uint64_t index = 0) const;
};

using TransformPtr = std::shared_ptr<const Transform>;

/// Applies transforms in order; they share the sample's stream, one after the other.
class Compose final : public Transform {
 public:
  explicit Compose(std::vector<TransformPtr> transforms);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  const std::vector<TransformPtr>& transforms() const { return transforms_; }

 private:
  std::vector<TransformPtr> transforms_;
};

}  // namespace qflow::data
