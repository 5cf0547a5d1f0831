// random_crop_flip_normalize: a training batch gathered from a uint8 data set, randomly cropped
// and flipped, scaled and normalised (Note [Augmentation on the device], augment_ops.h). The
// CPU kernel runs the samples in parallel; cuda/kernels/augment_ops.cpp is the GPU's.
#include <algorithm>
#include <optional>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/augment_ops.h"
#include "qflow/core/crop_flip_draws.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow {
namespace kernels {
namespace {

constexpr const char* kOp = "random_crop_flip_normalize";

// Reads and checks the op's arguments from sizes and dtypes alone (no tensor data is read, so
// the shape rule and both devices' kernels share it).
augment::CropFlipParams checked_params(const OpArgs& a) {
  const Tensor& images = a.tensor("images");
  const Tensor& indices = a.tensor("indices");
  QFLOW_CHECK(images.dtype() == DType::UInt8, "{}: images must be uint8 (N, C, H, W) as the data set stores them, got {}",
              kOp, images.dtype());
  QFLOW_CHECK(images.dim() == 4, "{}: images must be (N, C, H, W), got shape {}", kOp, images.sizes());
  QFLOW_CHECK(indices.dtype() == DType::Int64, "{}: indices must be int64, got {}", kOp, indices.dtype());
  QFLOW_CHECK(indices.dim() == 1, "{}: indices must be a vector (B), got shape {}", kOp, indices.sizes());
  augment::CropFlipParams p;
  p.channels = images.sizes()[1], p.height = images.sizes()[2], p.width = images.sizes()[3];
  QFLOW_CHECK(p.channels > 0 && p.height > 0 && p.width > 0, "{}: empty images of shape {}", kOp, images.sizes());
  const IntList crop = a.int_list("crop_size");
  p.padding = a.to_int("padding");
  QFLOW_CHECK(p.padding >= 0, "{}: negative padding {}", kOp, p.padding);
  if (crop.empty()) {
    QFLOW_CHECK(p.padding == 0, "{}: padding {} without a crop_size (padding belongs to the RandomCrop)", kOp, p.padding);
    p.out_h = p.height, p.out_w = p.width;
  } else {
    QFLOW_CHECK(crop.size() == 2 && crop[0] > 0 && crop[1] > 0,
                "{}: crop_size must be two positive sizes (height, width), got {}", kOp, crop);
    p.crop = true;
    p.out_h = crop[0], p.out_w = crop[1];
    const int64_t ph = p.height + 2 * p.padding, pw = p.width + 2 * p.padding;
    QFLOW_CHECK(p.out_h <= ph && p.out_w <= pw, "{}: crop size ({}, {}) is larger than the padded image ({}, {})", kOp,
                p.out_h, p.out_w, ph, pw);
    // SampleRng::randint's limit on its range.
    QFLOW_CHECK(ph - p.out_h < (int64_t{1} << 32) && pw - p.out_w < (int64_t{1} << 32),
                "{}: crop positions range wider than 2^32", kOp);
  }
  const int64_t fill = a.to_int("fill");
  QFLOW_CHECK(fill >= 0 && fill <= 255, "{}: fill must be a uint8 value in [0, 255], got {}", kOp, fill);
  p.fill = static_cast<uint8_t>(fill);
  if (!a.is_none("flip_p")) {
    p.flip = true;
    p.flip_p = a.to_double("flip_p");
    QFLOW_CHECK(p.flip_p >= 0 && p.flip_p <= 1, "{}: flip_p must be in [0, 1], got {}", kOp, p.flip_p);
  }
  p.flip_first = a.to_bool("flip_first");
  QFLOW_CHECK(!p.flip_first || (p.flip && p.crop), "{}: flip_first orders a flip and a crop; give both", kOp);
  const std::optional<Tensor> mean = a.optional_tensor("mean"), std = a.optional_tensor("std");
  QFLOW_CHECK(mean.has_value() == std.has_value(), "{}: give both mean and std, or neither", kOp);
  if (mean) {
    for (const Tensor* t : {&*mean, &*std}) {
      const char* name = t == &*mean ? "mean" : "std";
      QFLOW_CHECK(t->dtype() == DType::Float32, "{}: {} must be float32 (Normalize computes in float32), got {}", kOp,
                  name, t->dtype());
      QFLOW_CHECK(t->dim() == 1 && (t->numel() == 1 || t->numel() == p.channels),
                  "{}: {} must have 1 or {} (the channels) entries, got shape {}", kOp, name, p.channels, t->sizes());
    }
    QFLOW_CHECK(mean->numel() == std->numel(), "{}: mean has {} entries but std has {}", kOp, mean->numel(),
                std->numel());
  }
  return p;
}

std::vector<TensorMeta> augment_meta(const OpArgs& a) {
  const augment::CropFlipParams p = checked_params(a);
  return one({a.tensor("indices").numel(), p.channels, p.out_h, p.out_w}, DType::Float32);
}

// Per channel: mean and std as float32 (from a (1) or (C) tensor), or none.
struct ChannelNorm {
  std::vector<float> mean, std;
  bool on = false;
};

ChannelNorm channel_norm(const OpArgs& a, int64_t channels) {
  ChannelNorm n;
  const std::optional<Tensor> mean = a.optional_tensor("mean"), std = a.optional_tensor("std");
  if (!mean) return n;
  n.on = true;
  const Tensor m = contiguous(*mean), s = contiguous(*std);
  for (int64_t c = 0; c < channels; ++c) {
    n.mean.push_back(m.data_ptr<float>()[m.numel() == 1 ? 0 : c]);
    n.std.push_back(s.data_ptr<float>()[s.numel() == 1 ? 0 : c]);
  }
  return n;
}

Stack augment_kernel(OpArgs& a) {
  const augment::CropFlipParams p = checked_params(a);
  const Tensor images = contiguous(a.tensor("images"));
  const Tensor indices = contiguous(a.tensor("indices"));
  const uint64_t seed = static_cast<uint64_t>(a.to_int("seed"));
  const ChannelNorm norm = channel_norm(a, p.channels);
  const int64_t n = images.sizes()[0], batch = indices.numel();
  const int64_t* idx = indices.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b)
    QFLOW_CHECK(idx[b] >= 0 && idx[b] < n, "{}: index {} (at position {}) is out of range for a data set of {} images",
                kOp, idx[b], b, n);
  Tensor o = new_tensor({batch, p.channels, p.out_h, p.out_w}, DType::Float32);
  if (o.numel() == 0) return out(o);
  const uint8_t* src = images.data_ptr<uint8_t>();
  float* dst = o.data_ptr<float>();
  const int64_t plane = p.height * p.width, out_plane = p.out_h * p.out_w;
  // One sample per iteration: its draws, then its rows (samples write disjoint slices).
  parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> cols(static_cast<size_t>(p.out_w));
    for (int64_t b = begin; b < end; ++b) {
      const augment::SampleDraws d = augment::draw_sample(p, seed, static_cast<uint64_t>(idx[b]));
      for (int64_t x = 0; x < p.out_w; ++x) cols[static_cast<size_t>(x)] = augment::source_col(p, d, x);
      const uint8_t* image = src + idx[b] * p.channels * plane;
      float* sample = dst + b * p.channels * out_plane;
      for (int64_t c = 0; c < p.channels; ++c) {
        const float m = norm.on ? norm.mean[static_cast<size_t>(c)] : 0.0f;
        const float s = norm.on ? norm.std[static_cast<size_t>(c)] : 1.0f;
        for (int64_t y = 0; y < p.out_h; ++y) {
          const int64_t sy = augment::source_row(p, d, y);
          const uint8_t* row = sy < 0 ? nullptr : image + c * plane + sy * p.width;
          float* o_row = sample + c * out_plane + y * p.out_w;
          for (int64_t x = 0; x < p.out_w; ++x) {
            const int64_t sx = cols[static_cast<size_t>(x)];
            const uint8_t v = row == nullptr || sx < 0 ? p.fill : row[sx];
            o_row[x] = norm.on ? augment::normalized(v, m, s) : augment::to_unit(v);
          }
        }
      }
    }
  });
  return out(o);
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------
Tensor random_crop_flip_normalize(const Tensor& images, const Tensor& indices, uint64_t seed,
                                  const CropFlipNormalizeOptions& options, const Tensor& mean, const Tensor& std) {
  QFLOW_OP_HANDLE("random_crop_flip_normalize");
  auto opt = [](const Tensor& t) { return t.defined() ? Value(t) : Value(); };
  // The seed travels as the int64 with its bits (schema ints are signed).
  return call_tensor(op, {{"images", images},
                          {"indices", indices},
                          {"seed", static_cast<int64_t>(seed)},
                          {"crop_size", IntList(options.crop_size)},
                          {"padding", options.padding},
                          {"fill", options.fill},
                          {"flip_p", options.flip_p ? Value(*options.flip_p) : Value()},
                          {"flip_first", options.flip_first},
                          {"mean", opt(mean)},
                          {"std", opt(std)}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/augment.toml (Note [One declaration per op]).
#include "core/ops/augment.inc"
