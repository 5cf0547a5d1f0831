// DeviceDataLoader: the data set uploaded once, batches made by one op call each. See Note
// [Data on the device].
#include "qflow/data/device_data_loader.h"

#include <algorithm>
#include <cstring>

#include "epoch_plan.h"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/data/transforms.h"

namespace qflow::data {

namespace {

// What the transform asks of random_crop_flip_normalize.
struct Recognised {
  CropFlipNormalizeOptions augment;
  std::optional<std::vector<double>> mean, std;
};

struct Walk {
  int64_t channels, height, width;
  Recognised r;
  bool crop = false, flip = false, to_tensor = false, normalize = false;
};

std::string refusal(const Transform& t, const std::string& why) {
  return fmt::format("DeviceDataLoader: cannot run {} on the device: {}", t.repr(), why);
}

// Walks the pipeline in application order; returns "" when the op can run it, else why not.
std::string recognise(const Transform& t, Walk& w) {
  if (const auto* compose = dynamic_cast<const Compose*>(&t)) {
    for (const TransformPtr& step : compose->transforms()) {
      if (!step) return refusal(t, "it holds a null transform");
      if (std::string why = recognise(*step, w); !why.empty()) return why;
    }
    return "";
  }
  if (const auto* crop = dynamic_cast<const RandomCrop*>(&t)) {
    if (w.crop) return refusal(t, "the pipeline has a second RandomCrop (the device runs one)");
    if (w.to_tensor)
      return refusal(t, "it comes after ToTensor, cropping float images (the device crops the uint8 images: put "
                        "RandomCrop before ToTensor)");
    const auto [th, tw] = crop->size();
    const int64_t ph = w.height + 2 * crop->padding(), pw = w.width + 2 * crop->padding();
    if (th > ph || tw > pw)
      return refusal(t, fmt::format("the crop ({}, {}) is larger than the padded image ({}, {})", th, tw, ph, pw));
    w.crop = true;
    w.r.augment.crop_size = {th, tw};
    w.r.augment.padding = crop->padding();
    // RandomCrop's fill on a uint8 image (transforms.cpp's cast_fill<uint8_t>).
    w.r.augment.fill = static_cast<int64_t>(static_cast<uint8_t>(std::clamp(crop->fill(), 0.0, 255.0)));
    w.r.augment.flip_first = w.flip;
    return "";
  }
  if (const auto* flip = dynamic_cast<const RandomHorizontalFlip*>(&t)) {
    // Mirroring commutes with the per-channel ToTensor and Normalize, so only its place
    // relative to the crop matters.
    if (w.flip) return refusal(t, "the pipeline has a second RandomHorizontalFlip (the device runs one)");
    w.flip = true;
    w.r.augment.flip_p = flip->p();
    return "";
  }
  if (const auto* to_tensor = dynamic_cast<const ToTensor*>(&t)) {
    if (to_tensor->layout() != ImageLayout::CHW)
      return refusal(t, "it reads (H, W, C) images; the data set's images are (C, H, W)");
    w.to_tensor = true;  // a second one sees float32 and changes nothing
    return "";
  }
  if (const auto* norm = dynamic_cast<const Normalize*>(&t)) {
    if (w.normalize) return refusal(t, "the pipeline has a second Normalize (the device runs one)");
    if (!w.to_tensor) return refusal(t, "it comes before ToTensor, on uint8 images (the CPU refuses it too)");
    const int64_t entries = static_cast<int64_t>(norm->mean().size());
    if (entries != 1 && entries != w.channels)
      return refusal(t, fmt::format("{} mean/std entries for images of {} channels", entries, w.channels));
    w.normalize = true;
    w.r.mean = norm->mean();
    w.r.std = norm->std();
    return "";
  }
  return refusal(t, "the device runs only RandomCrop, RandomHorizontalFlip, ToTensor and Normalize (in a Compose)");
}

// Why sample 0 of `dataset` cannot be stored as the device's uint8 (N, C, H, W), or "".
std::string image_refusal(const Dataset& dataset, Tensor& first) {
  if (dataset.size() == 0) return "DeviceDataLoader: the data set is empty (nothing to load onto the device)";
  first = dataset.get(0).image;
  if (!first.defined() || first.dim() != 3 || first.dtype() != DType::UInt8)
    return fmt::format(
        "DeviceDataLoader: the device holds uint8 images (C, H, W), but sample 0 is {} of shape {}",
        first.defined() ? fmt::format("{}", first.dtype()) : std::string("undefined"),
        first.defined() ? first.sizes() : std::vector<int64_t>{});
  return "";
}

std::string check(const Dataset& dataset, const Transform* transform, Recognised* out) {
  Tensor first;
  if (std::string why = image_refusal(dataset, first); !why.empty()) return why;
  Walk w{first.sizes()[0], first.sizes()[1], first.sizes()[2], {}};
  if (transform != nullptr)
    if (std::string why = recognise(*transform, w); !why.empty()) return why;
  if (out != nullptr) *out = std::move(w.r);
  return "";
}

}  // namespace

std::string DeviceDataLoader::unsupported_reason(const Dataset& dataset, const Transform* transform) {
  return check(dataset, transform, nullptr);
}

int64_t DeviceDataLoader::bytes_needed(const Dataset& dataset) {
  if (dataset.size() == 0) return 0;
  const Tensor first = dataset.get(0).image;
  const int64_t image = first.defined() ? first.numel() * static_cast<int64_t>(element_size(first.dtype())) : 0;
  return dataset.size() * (image + static_cast<int64_t>(sizeof(int64_t)));
}

DeviceDataLoader::DeviceDataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, Device device)
    : dataset_(std::move(dataset)), options_(std::move(options)), device_(device) {
  QFLOW_CHECK(dataset_ != nullptr, "DeviceDataLoader: null dataset");
  QFLOW_CHECK(options_.batch_size >= 1, "DeviceDataLoader: batch_size must be >= 1, got {}", options_.batch_size);
  options_.sampler.validate();
  Recognised r;
  if (std::string why = check(*dataset_, options_.transform.get(), &r); !why.empty()) QFLOW_FAIL("{}", why);
  augment_ = std::move(r.augment);
  const int64_t n = dataset_->size(), classes = dataset_->num_classes();
  const std::vector<int64_t> shape = dataset_->get(0).image.sizes();
  const int64_t image_bytes = shape[0] * shape[1] * shape[2];
  // Every sample once, into one host buffer in the stored layout, then one upload.
  Tensor images = empty({n, shape[0], shape[1], shape[2]}, DType::UInt8);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  uint8_t* dst = images.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const Example ex = dataset_->get(i);
    QFLOW_CHECK(ex.label >= 0 && (classes == 0 || ex.label < classes),
                "DeviceDataLoader: sample {} has label {} outside [0, {})", i, ex.label, classes);
    QFLOW_CHECK(ex.image.defined() && ex.image.dtype() == DType::UInt8 && ex.image.sizes() == shape,
                "DeviceDataLoader: sample {} is {} of shape {} but sample 0 is uint8 of shape {} (the device holds "
                "one uint8 array)",
                i, ex.image.defined() ? fmt::format("{}", ex.image.dtype()) : std::string("undefined"),
                ex.image.defined() ? ex.image.sizes() : std::vector<int64_t>{}, shape);
    const Tensor x = ex.image.contiguous();
    std::memcpy(dst + i * image_bytes, x.data_ptr<uint8_t>(), static_cast<size_t>(image_bytes));
    labels[static_cast<size_t>(i)] = ex.label;
  }
  images_ = images.to(device_);
  labels_ = from_vector<int64_t>(labels, {n}).to(device_);
  if (r.mean) {
    // Normalize computes with its mean and std cast to float32 (transforms.cpp).
    std::vector<float> mean, std;
    for (double v : *r.mean) mean.push_back(static_cast<float>(v));
    for (double v : *r.std) std.push_back(static_cast<float>(v));
    const int64_t entries = static_cast<int64_t>(mean.size());
    mean_ = from_vector<float>(mean, {entries}).to(device_);
    std_ = from_vector<float>(std, {entries}).to(device_);
  }
}

int64_t DeviceDataLoader::size() const { return detail::batches_per_epoch(dataset_->size(), options_); }

void DeviceDataLoader::start_epoch() {
  detail::EpochPlan plan = detail::plan_epoch(dataset_->size(), options_, next_epoch_++);
  const int64_t n = static_cast<int64_t>(plan.order.size());
  order_ = from_vector<int64_t>(plan.order, {n}).to(device_);  // the epoch's one upload
  transform_seed_ = plan.transform_seed;
  next_batch_ = 0;
  num_batches_ = size();
  in_epoch_ = true;
}

std::optional<Batch> DeviceDataLoader::next() {
  if (!in_epoch_) return std::nullopt;
  if (next_batch_ >= num_batches_) {
    in_epoch_ = false;
    order_ = Tensor();
    return std::nullopt;
  }
  const int64_t first = next_batch_++ * options_.batch_size;
  const int64_t count = std::min<int64_t>(options_.batch_size, order_.numel() - first);
  const Tensor index = narrow(order_, 0, first, count);
  Batch b;
  b.images = random_crop_flip_normalize(images_, index, transform_seed_, augment_, mean_, std_);
  b.labels = index_select(labels_, 0, index);
  return b;
}

}  // namespace qflow::data
