#include "data_setup.h"

#include <filesystem>

namespace qflow::tools {

namespace {

data::TransformPtr make_transform(const DataSetup& s, int64_t crop_padding, bool flip, bool augment) {
  std::vector<data::TransformPtr> steps;
  if (augment) {
    steps.push_back(std::make_shared<data::RandomCrop>(s.image_size, crop_padding));
    if (flip) steps.push_back(std::make_shared<data::RandomHorizontalFlip>());
  }
  steps.push_back(std::make_shared<data::ToTensor>());
  steps.push_back(std::make_shared<data::Normalize>(s.mean, s.std));
  return std::make_shared<data::Compose>(std::move(steps));
}

std::shared_ptr<const data::Dataset> maybe_subset(std::shared_ptr<const data::Dataset> d, int64_t n) {
  if (!d || n <= 0 || n >= d->size()) return d;
  return std::make_shared<data::Subset>(std::move(d), n);
}

// Constructs the split(s) asked for, each with `make(train)`.
template <typename Make>
void load(DataSetup& s, const DataOptions& o, Make&& make) {
  if (o.load_train) s.train = make(true);
  if (o.load_test) s.test = make(false);
}

}  // namespace

DataSetup make_data(const DataOptions& o) {
  QFLOW_CHECK(o.load_train || o.load_test, "make_data: asked for neither the train nor the test split");
  DataSetup s;
  int64_t pad = 4;
  bool flip = true;
  if (o.dataset == "cifar10") {
    QFLOW_CHECK(!o.data.empty(), "--data DIR is required for cifar10 (the binary version or its .tar.gz)");
    load(s, o, [&](bool train) { return std::make_shared<data::CIFAR10>(o.data, train); });
    s.mean = {0.4914, 0.4822, 0.4465}, s.std = {0.2470, 0.2435, 0.2616};
  } else if (o.dataset == "fashion-mnist") {
    const std::string root = o.data.empty() ? data::FashionMNIST::kDebianRoot : o.data;
    load(s, o, [&](bool train) { return std::make_shared<data::FashionMNIST>(root, train); });
    s.mean = {0.2860}, s.std = {0.3530};
    s.channels = 1, s.image_size = 28, pad = 2;
  } else if (o.dataset == "mnist") {
    QFLOW_CHECK(!o.data.empty(), "--data DIR is required for mnist");
    load(s, o, [&](bool train) { return std::make_shared<data::MNIST>(o.data, train); });
    s.mean = {0.1307}, s.std = {0.3081};
    s.channels = 1, s.image_size = 28, pad = 2, flip = false;  // flipped digits are other digits
  } else {
    QFLOW_CHECK(o.dataset == "folder", "unknown dataset '{}' (cifar10, fashion-mnist, mnist or folder)", o.dataset);
    QFLOW_CHECK(!o.data.empty(), "--data DIR (with train/ and test/ sub-folders) is required for folder");
    load(s, o, [&](bool train) {
      return std::make_shared<data::ImageFolder>((std::filesystem::path(o.data) / (train ? "train" : "test")).string());
    });
    const auto& any = s.train ? s.train : s.test;
    QFLOW_CHECK(any->size() > 0, "folder {}: no PNG images", o.data);
    const Tensor first = any->get(0).image;
    s.channels = first.sizes()[0], s.image_size = first.sizes()[1];
    s.mean.assign(static_cast<size_t>(s.channels), 0.5);
    s.std.assign(static_cast<size_t>(s.channels), 0.5);
  }
  s.train = maybe_subset(s.train, o.subset);
  s.test = maybe_subset(s.test, o.test_subset);
  s.train_transform = make_transform(s, pad, flip, o.augment);
  s.test_transform = make_transform(s, pad, flip, false);
  return s;
}

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"cifar10", "fashion-mnist", "mnist", "folder"};
  return names;
}

}  // namespace qflow::tools
