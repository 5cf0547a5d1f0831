#pragma once
// Image transforms with torchvision's names and semantics, on (C, H, W) tensors of uint8,
// float32 or float64. Shapes in the comments: (C, H, W) in, (C', H', W') out.
#include <array>
#include <vector>

#include "qflow/data/transform.h"

namespace qflow::data {

/// Memory layout of a 3-d image given to ToTensor.
enum class ImageLayout { CHW, HWC };

/// uint8 (C, H, W) / (H, W, C) / (H, W) -> float32 (C, H, W) scaled to [0, 1] (x / 255).
/// Float input is converted to float32 without scaling, as torchvision does.
class ToTensor final : public Transform {
 public:
  explicit ToTensor(ImageLayout layout = ImageLayout::CHW) : layout_(layout) {}
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override { return "ToTensor()"; }
  ImageLayout layout() const { return layout_; }

 private:
  ImageLayout layout_;
};

/// float (C, H, W) -> (x - mean[c]) / std[c], same dtype. mean/std have C entries (or one,
/// used for every channel).
class Normalize final : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& std() const { return std_; }

 private:
  std::vector<double> mean_, std_;
};

/// (C, H, W) -> (C, H + top + bottom, W + left + right), border filled with `fill`.
/// `padding` as in torchvision: {all}, {left/right, top/bottom} or {left, top, right, bottom}.
class Pad final : public Transform {
 public:
  explicit Pad(std::vector<int64_t> padding, double fill = 0);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;

 private:
  int64_t left_, top_, right_, bottom_;
  double fill_;
};

/// Pads every side by `padding` (filled with `fill`), then cuts a (size_h, size_w) window at
/// a uniformly random position (top drawn first, then left, as torchvision draws them).
/// The padding is virtual: out-of-image pixels are filled while copying, nothing is padded.
class RandomCrop final : public Transform {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0, double fill = 0) : RandomCrop({size, size}, padding, fill) {}
  RandomCrop(std::array<int64_t, 2> size, int64_t padding = 0, double fill = 0);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  /// (height, width) of the crop.
  std::array<int64_t, 2> size() const { return size_; }
  int64_t padding() const { return padding_; }
  double fill() const { return fill_; }

 private:
  std::array<int64_t, 2> size_;
  int64_t padding_;
  double fill_;
};

/// Mirrors the image left-right with probability p (one uniform draw per sample, always
/// taken so later transforms see the same stream either way).
class RandomHorizontalFlip final : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace qflow::data
