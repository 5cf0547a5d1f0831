#pragma once
// MNIST and Fashion-MNIST from their IDX files, plain or gzip-compressed.
#include <string>
#include <vector>

#include "qflow/data/dataset.h"

namespace qflow::data {

/// MNIST digits: images (1, 28, 28) uint8, labels 0..9, classes "0".."9".
///
/// Reads `train-images-idx3-ubyte` + `train-labels-idx1-ubyte` (train) or the `t10k-` pair
/// (test), each plain or with `.gz`, from `root`, `root/<Name>/raw` (torchvision's layout)
/// or `root/raw`. All images sit in one contiguous buffer; samples are views into it.
class MNIST : public Dataset {
 public:
  explicit MNIST(const std::string& root, bool train = true);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Example get(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }

  /// The files the data came from.
  const std::string& images_file() const { return images_file_; }
  const std::string& labels_file() const { return labels_file_; }
  const std::vector<int64_t>& labels() const { return labels_; }

 protected:
  MNIST(const std::string& root, bool train, const std::string& name, std::vector<std::string> classes);

 private:
  std::string name_;
  std::string images_file_, labels_file_;
  Tensor images_;  // (N, 1, H, W) uint8
  std::vector<int64_t> labels_;
  std::vector<std::string> classes_;
};

/// Fashion-MNIST (Zalando): same format and sizes as MNIST, ten clothing classes.
class FashionMNIST final : public MNIST {
 public:
  /// Where Debian's `fashion-mnist` package installs the four .gz files.
  static constexpr const char* kDebianRoot = "/usr/share/datasets/fashion-mnist";

  explicit FashionMNIST(const std::string& root = kDebianRoot, bool train = true);

  /// T-shirt/top, Trouser, Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, Ankle boot.
  static const std::vector<std::string>& default_class_names();
};

}  // namespace qflow::data
