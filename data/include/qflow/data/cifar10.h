#pragma once
// CIFAR-10, binary version (https://www.cs.toronto.edu/~kriz/cifar.html): read from the batch
// files or straight from the official `cifar-10-binary.tar.gz`.
#include <string>
#include <vector>

#include "qflow/data/dataset.h"

namespace qflow::data {

/// CIFAR-10 images (3, 32, 32) uint8 with labels 0..9.
///
/// Each batch file (`data_batch_1.bin` .. `data_batch_5.bin` for training, `test_batch.bin`
/// for testing) is a sequence of 3073-byte records: one label byte, then the 1024 red, 1024
/// green and 1024 blue bytes of a 32x32 image, row-major — exactly the (3, 32, 32) layout of a
/// sample, so every image is a view into one contiguous buffer holding the whole split.
/// Samples come in the order of the batch files (1..5), as torchvision reads them.
class CIFAR10 final : public Dataset {
 public:
  static constexpr int64_t kImageBytes = 3 * 32 * 32;
  static constexpr int64_t kRecordBytes = 1 + kImageBytes;
  static constexpr int64_t kNumClasses = 10;

  /// `root` is one of: a directory holding the batch files (directly or in the archive's
  /// `cifar-10-batches-bin/` folder), a directory holding `cifar-10-binary.tar.gz`, or the
  /// path of a .tar.gz (or plain .tar) archive, which is read without unpacking.
  /// `batches.meta.txt`, when present, gives the class names.
  explicit CIFAR10(const std::string& root, bool train = true);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Example get(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }

  /// The directory or archive the data came from.
  const std::string& source() const { return source_; }
  /// Labels in sample order.
  const std::vector<int64_t>& labels() const { return labels_; }

  /// airplane, automobile, bird, cat, deer, dog, frog, horse, ship, truck.
  static const std::vector<std::string>& default_class_names();

 private:
  void load_directory(const std::string& dir, bool train);
  void load_archive(const std::string& path, bool train);

  std::string source_;
  Tensor images_;               // (records, 3, 32, 32) uint8, in the order the files were read
  std::vector<int64_t> labels_;  // sample order
  std::vector<int64_t> record_of_sample_;  // empty when samples are stored in order
  std::vector<std::string> classes_;
};

}  // namespace qflow::data
