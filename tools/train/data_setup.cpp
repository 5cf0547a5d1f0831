#include "data_setup.h"

#include <filesystem>

namespace qflow::tools {

namespace {

struct Stats {
  std::vector<double> mean, std;
};

data::TransformPtr make_transform(const Stats& s, int64_t size, int64_t crop_padding, bool flip, bool augment) {
  std::vector<data::TransformPtr> steps;
  if (augment) {
    steps.push_back(std::make_shared<data::RandomCrop>(size, crop_padding));
    if (flip) steps.push_back(std::make_shared<data::RandomHorizontalFlip>());
  }
  steps.push_back(std::make_shared<data::ToTensor>());
  steps.push_back(std::make_shared<data::Normalize>(s.mean, s.std));
  return std::make_shared<data::Compose>(std::move(steps));
}

std::shared_ptr<const data::Dataset> maybe_subset(std::shared_ptr<const data::Dataset> d, int64_t n) {
  if (n <= 0 || n >= d->size()) return d;
  return std::make_shared<data::Subset>(std::move(d), n);
}

}  // namespace

DataSetup make_data(const TrainOptions& o) {
  DataSetup s;
  Stats stats;
  int64_t pad = 4;
  bool flip = true;
  if (o.dataset == "cifar10") {
    QFLOW_CHECK(!o.data.empty(), "qflow-train: --data DIR is required for cifar10 (the binary version or its .tar.gz)");
    s.train = std::make_shared<data::CIFAR10>(o.data, true);
    s.test = std::make_shared<data::CIFAR10>(o.data, false);
    stats = {{0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}};
  } else if (o.dataset == "fashion-mnist") {
    const std::string root = o.data.empty() ? data::FashionMNIST::kDebianRoot : o.data;
    s.train = std::make_shared<data::FashionMNIST>(root, true);
    s.test = std::make_shared<data::FashionMNIST>(root, false);
    stats = {{0.2860}, {0.3530}};
    s.channels = 1, s.image_size = 28, pad = 2;
  } else if (o.dataset == "mnist") {
    QFLOW_CHECK(!o.data.empty(), "qflow-train: --data DIR is required for mnist");
    s.train = std::make_shared<data::MNIST>(o.data, true);
    s.test = std::make_shared<data::MNIST>(o.data, false);
    stats = {{0.1307}, {0.3081}};
    s.channels = 1, s.image_size = 28, pad = 2, flip = false;  // flipped digits are other digits
  } else {
    QFLOW_CHECK(!o.data.empty(), "qflow-train: --data DIR (with train/ and test/ sub-folders) is required for folder");
    s.train = std::make_shared<data::ImageFolder>((std::filesystem::path(o.data) / "train").string());
    s.test = std::make_shared<data::ImageFolder>((std::filesystem::path(o.data) / "test").string());
    const Tensor first = s.train->get(0).image;
    s.channels = first.sizes()[0], s.image_size = first.sizes()[1];
    stats = {std::vector<double>(static_cast<size_t>(s.channels), 0.5), std::vector<double>(static_cast<size_t>(s.channels), 0.5)};
  }
  s.train = maybe_subset(s.train, o.subset);
  s.test = maybe_subset(s.test, o.test_subset);
  s.train_transform = make_transform(stats, s.image_size, pad, flip, o.augment);
  s.test_transform = make_transform(stats, s.image_size, pad, flip, false);
  return s;
}

}  // namespace qflow::tools
