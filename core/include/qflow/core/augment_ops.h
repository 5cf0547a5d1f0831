#pragma once
// Data augmentation as an op, for data sets resident on a device (data::DeviceDataLoader).
//
// Note [Augmentation on the device]
// random_crop_flip_normalize(images, indices, seed, ...) makes a training batch from a whole
// data set held as uint8 (N, C, H, W) — the layout MNIST, Fashion-MNIST and CIFAR-10 store and
// Dataset::get returns per sample, so one upload of the stored bytes is the data set — and the
// dataset indices (B) of the batch. Sample b is what the CPU pipeline
//   Compose([RandomCrop(size, padding, fill)], [RandomHorizontalFlip(p)], ToTensor(), [Normalize(mean, std)])
// (crop and flip in either order, each optional) makes of image indices[b] with
// SampleRng(seed, indices[b]): the same draws in the same order (crop: top then left, Lemire's
// rejection; flip: uniform() < p, drawn even when p is 0 or 1), then float(v) / 255 and
// (x - mean[c]) / std[c] in float32, in that order — so a batch equals the CPU DataLoader's bit
// for bit. The arithmetic is one header (qflow/core/crop_flip_draws.h) that the CPU kernel (an
// OpenMP loop over samples) and the CUDA kernel (one thread per output element, Philox in the
// kernel, no host synchronisation) both compile.
// Checked where: the shape rule checks dtypes, shapes and parameter ranges from sizes alone;
// the CPU kernel checks every index; the CUDA kernel traps on an index outside [0, N) (as
// index_select does: checking on the host would copy the indices back and synchronise), so the
// error surfaces at the next synchronisation — the device loader builds its indices from the
// epoch's order on the CPU, where they are in range by construction. std's entries are not
// checked for zeros (reading them would synchronise); data::Normalize refuses a zero std when
// it is built, and the loader takes its values from there.
// The op has no derivative (its images are integers; mean and std are constants of the
// pipeline) and no ONNX form (a random draw): autograd refuses it on a mean/std that requires
// grad, and export refuses it by name.
#include <cstdint>
#include <optional>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow {

/// Crop, flip and normalisation options of random_crop_flip_normalize; the defaults do none.
struct CropFlipNormalizeOptions {
  /// RandomCrop's output (height, width); empty: no RandomCrop (no draws, no padding).
  std::vector<int64_t> crop_size{};
  int64_t padding = 0;
  /// The padding's value in the uint8 image (RandomCrop's fill, clamped to [0, 255] and truncated as it does).
  int64_t fill = 0;
  /// RandomHorizontalFlip's probability; nullopt: no flip (no draw).
  std::optional<double> flip_p{};
  /// The flip precedes the crop in the pipeline (the draws and the mirrored window change).
  bool flip_first = false;
};

/// float32 (B, C, th, tw) on images' device: the samples `indices` (int64, (B)) of `images`
/// (uint8, (N, C, H, W)) augmented with the draws of SampleRng(seed, index) (Note [Augmentation
/// on the device]). `mean`/`std`: float32 (C) or (1) on images' device, both or neither (undefined).
Tensor random_crop_flip_normalize(const Tensor& images, const Tensor& indices, uint64_t seed,
                                  const CropFlipNormalizeOptions& options = {}, const Tensor& mean = Tensor(),
                                  const Tensor& std = Tensor());

}  // namespace qflow
