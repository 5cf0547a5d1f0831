// ToTensor, Normalize, Pad, RandomCrop, RandomHorizontalFlip: plain loops over contiguous
// (C, H, W) images, allocated directly (see tensor_alloc.h) — they run in loader workers.
#include "qflow/data/transforms.h"

#include <algorithm>
#include <cstring>

#include "qflow/core/error.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace {

template <typename Fn>
decltype(auto) visit_image(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::UInt8: return fn(TypeTag<uint8_t>{});
    case DType::Float32: return fn(TypeTag<float>{});
    case DType::Float64: return fn(TypeTag<double>{});
    default: QFLOW_FAIL("{}: expected a uint8, float32 or float64 image, got {}", op, t);
  }
}

// The input as a contiguous (C, H, W) tensor.
Tensor chw_image(const Tensor& image, const char* op) {
  QFLOW_CHECK(image.defined(), "{}: undefined image", op);
  QFLOW_CHECK(image.dim() == 3, "{}: expected an image (C, H, W), got shape {}", op, image.sizes());
  return image.is_contiguous() ? image : image.contiguous();
}

template <typename T>
T cast_fill(double v) {
  if constexpr (std::is_same_v<T, uint8_t>) return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
  else return static_cast<T>(v);
}

// Copies rows of `src` (C, H, W) into `dst` (C, OH, OW) shifted by (dy, dx): dst(y, x) =
// src(y + dy, x + dx) where that lies inside src, `fill` elsewhere.
template <typename T>
void shifted_copy(const T* src, int64_t c, int64_t h, int64_t w, T* dst, int64_t oh, int64_t ow, int64_t dy,
                  int64_t dx, T fill) {
  const int64_t x0 = std::clamp<int64_t>(-dx, 0, ow), x1 = std::clamp<int64_t>(w - dx, x0, ow);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t y = 0; y < oh; ++y) {
      T* out = dst + (ch * oh + y) * ow;
      const int64_t sy = y + dy;
      if (sy < 0 || sy >= h) {
        std::fill(out, out + ow, fill);
        continue;
      }
      std::fill(out, out + x0, fill);
      std::memcpy(out + x0, src + (ch * h + sy) * w + x0 + dx, static_cast<size_t>(x1 - x0) * sizeof(T));
      std::fill(out + x1, out + ow, fill);
    }
  }
}

std::string double_list(const std::vector<double>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

}  // namespace

// ---- ToTensor -------------------------------------------------------------------------------------
Tensor ToTensor::apply(const Tensor& image, SampleRng&) const {
  QFLOW_CHECK(image.defined() && (image.dim() == 2 || image.dim() == 3),
              "ToTensor: expected an image (C, H, W), (H, W, C) or (H, W), got shape {}",
              image.defined() ? image.sizes() : std::vector<int64_t>{});
  Tensor x = image.dim() == 2 ? image.unsqueeze(0) : image;
  if (layout_ == ImageLayout::HWC && image.dim() == 3) x = x.permute({2, 0, 1});
  if (x.dtype() == DType::Float32 && x.is_contiguous()) return x;
  x = x.contiguous();
  Tensor out = detail::new_tensor(x.sizes(), DType::Float32);
  float* o = out.data_ptr<float>();
  const int64_t n = x.numel();
  visit_image(x.dtype(), "ToTensor", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data_ptr<T>();
    // Division (not a multiply by 1/255) so the values equal torchvision's bit for bit.
    if constexpr (std::is_same_v<T, uint8_t>)
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]) / 255.0f;
    else
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
  });
  return out;
}

// ---- Normalize ------------------------------------------------------------------------------------
Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  QFLOW_CHECK(!mean_.empty() && mean_.size() == std_.size(),
              "Normalize: mean and std need the same number (>= 1) of entries, got {} and {}", mean_.size(), std_.size());
  for (double s : std_) QFLOW_CHECK(s != 0, "Normalize: std {} contains a zero", double_list(std_));
}

Tensor Normalize::apply(const Tensor& image, SampleRng&) const {
  const Tensor x = chw_image(image, "Normalize");
  const int64_t c = x.sizes()[0], plane = x.sizes()[1] * x.sizes()[2];
  QFLOW_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c,
              "Normalize: {} mean/std entries for an image of {} channels", mean_.size(), c);
  Tensor out = detail::new_tensor(x.sizes(), x.dtype());
  visit_floating(x.dtype(), "Normalize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(ch);
      // (x - mean) / std in T, as torchvision's sub_(mean).div_(std) computes it.
      const T m = static_cast<T>(mean_[k]), sd = static_cast<T>(std_[k]);
      for (int64_t i = ch * plane; i < (ch + 1) * plane; ++i) o[i] = (s[i] - m) / sd;
    }
  });
  return out;
}

std::string Normalize::repr() const {
  return fmt::format("Normalize(mean={}, std={})", double_list(mean_), double_list(std_));
}

// ---- Pad ------------------------------------------------------------------------------------------
Pad::Pad(std::vector<int64_t> p, double fill) : fill_(fill) {
  QFLOW_CHECK(p.size() == 1 || p.size() == 2 || p.size() == 4,
              "Pad: padding takes 1, 2 or 4 values, got {}", p.size());
  if (p.size() == 1) p = {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) p = {p[0], p[1], p[0], p[1]};
  for (int64_t v : p) QFLOW_CHECK(v >= 0, "Pad: negative padding {}", p);
  left_ = p[0], top_ = p[1], right_ = p[2], bottom_ = p[3];
}

Tensor Pad::apply(const Tensor& image, SampleRng&) const {
  const Tensor x = chw_image(image, "Pad");
  const int64_t c = x.sizes()[0], h = x.sizes()[1], w = x.sizes()[2];
  const int64_t oh = h + top_ + bottom_, ow = w + left_ + right_;
  Tensor out = detail::new_tensor({c, oh, ow}, x.dtype());
  visit_image(x.dtype(), "Pad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    shifted_copy(x.data_ptr<T>(), c, h, w, out.data_ptr<T>(), oh, ow, -top_, -left_, cast_fill<T>(fill_));
  });
  return out;
}

std::string Pad::repr() const {
  return fmt::format("Pad(padding=[{}, {}, {}, {}], fill={})", left_, top_, right_, bottom_, fill_);
}

// ---- RandomCrop -----------------------------------------------------------------------------------
RandomCrop::RandomCrop(std::array<int64_t, 2> size, int64_t padding, double fill)
    : size_(size), padding_(padding), fill_(fill) {
  QFLOW_CHECK(size[0] > 0 && size[1] > 0, "RandomCrop: size must be positive, got ({}, {})", size[0], size[1]);
  QFLOW_CHECK(padding >= 0, "RandomCrop: negative padding {}", padding);
}

Tensor RandomCrop::apply(const Tensor& image, SampleRng& rng) const {
  const Tensor x = chw_image(image, "RandomCrop");
  const int64_t c = x.sizes()[0], h = x.sizes()[1], w = x.sizes()[2];
  const int64_t ph = h + 2 * padding_, pw = w + 2 * padding_;
  // Plain variables, not a structured binding: clang before 16 cannot capture bindings.
  const int64_t th = size_[0], tw = size_[1];
  QFLOW_CHECK(th <= ph && tw <= pw, "RandomCrop: crop size ({}, {}) is larger than the padded image ({}, {})", th, tw,
              ph, pw);
  const int64_t top = rng.randint(0, ph - th);
  const int64_t left = rng.randint(0, pw - tw);
  Tensor out = detail::new_tensor({c, th, tw}, x.dtype());
  visit_image(x.dtype(), "RandomCrop", [&](auto tag) {
    using T = typename decltype(tag)::type;
    shifted_copy(x.data_ptr<T>(), c, h, w, out.data_ptr<T>(), th, tw, top - padding_, left - padding_,
                 cast_fill<T>(fill_));
  });
  return out;
}

std::string RandomCrop::repr() const {
  return fmt::format("RandomCrop(size=({}, {}), padding={})", size_[0], size_[1], padding_);
}

// ---- RandomHorizontalFlip -------------------------------------------------------------------------
RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  QFLOW_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got {}", p);
}

Tensor RandomHorizontalFlip::apply(const Tensor& image, SampleRng& rng) const {
  const bool flip = rng.uniform() < p_;
  const Tensor x = chw_image(image, "RandomHorizontalFlip");
  if (!flip) return x;
  const int64_t rows = x.sizes()[0] * x.sizes()[1], w = x.sizes()[2];
  Tensor out = detail::new_tensor(x.sizes(), x.dtype());
  visit_image(x.dtype(), "RandomHorizontalFlip", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for (int64_t r = 0; r < rows; ++r) std::reverse_copy(s + r * w, s + (r + 1) * w, o + r * w);
  });
  return out;
}

std::string RandomHorizontalFlip::repr() const { return fmt::format("RandomHorizontalFlip(p={})", p_); }

}  // namespace qflow::data
