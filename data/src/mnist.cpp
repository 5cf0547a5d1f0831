// MNIST / Fashion-MNIST on top of read_idx.
#include "qflow/data/mnist.h"

#include <filesystem>

#include "qflow/core/error.h"
#include "qflow/data/idx.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace fs = std::filesystem;

namespace {

// `stem` plain or gzip-compressed in the usual places; the plain file wins when both exist.
std::string find_idx(const std::string& root, const std::string& name, const std::string& stem) {
  const fs::path r(root);
  QFLOW_CHECK(fs::is_directory(r), "{}: {} is not a directory", name, root);
  for (const fs::path& dir : {r, r / name / "raw", r / "raw"}) {
    for (const std::string& file : {stem, stem + ".gz"})
      if (fs::is_regular_file(dir / file)) return (dir / file).string();
  }
  QFLOW_FAIL("{}: {}[.gz] not found in {} (also looked in {}/{}/raw and {}/raw)", name, stem, root, root, name, root);
}

std::vector<std::string> digit_names() {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back(std::to_string(i));
  return names;
}

}  // namespace

MNIST::MNIST(const std::string& root, bool train) : MNIST(root, train, "MNIST", digit_names()) {}

MNIST::MNIST(const std::string& root, bool train, const std::string& name, std::vector<std::string> classes)
    : name_(name), classes_(std::move(classes)) {
  const std::string prefix = train ? "train" : "t10k";
  images_file_ = find_idx(root, name, prefix + "-images-idx3-ubyte");
  labels_file_ = find_idx(root, name, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(images_file_, 3);
  const Tensor labels = read_idx(labels_file_, 1);
  const int64_t n = images.sizes()[0];
  QFLOW_CHECK(labels.sizes()[0] == n, "{}: {} images in {} but {} labels in {}", name, n, images_file_,
              labels.sizes()[0], labels_file_);
  const uint8_t* l = labels.data_ptr<uint8_t>();
  labels_.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // Offsets count the 8-byte header (magic + one dim).
    QFLOW_CHECK(l[i] < classes_.size(), "{}: label {} out of range [0, {}) at index {} (offset {})", labels_file_,
                int{l[i]}, classes_.size(), i, 8 + i);
    labels_.push_back(l[i]);
  }
  // (N, H, W) -> (N, 1, H, W): same bytes, one channel.
  images_ = detail::view_into(images, {n, 1, images.sizes()[1], images.sizes()[2]}, 0);
}

Example MNIST::get(int64_t index) const {
  detail::check_index(name_.c_str(), index, size());
  const int64_t h = images_.sizes()[2], w = images_.sizes()[3];
  return {detail::view_into(images_, {1, h, w}, index * h * w), labels_[static_cast<size_t>(index)]};
}

const std::vector<std::string>& FashionMNIST::default_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

FashionMNIST::FashionMNIST(const std::string& root, bool train)
    : MNIST(root, train, "FashionMNIST", default_class_names()) {}

}  // namespace qflow::data
