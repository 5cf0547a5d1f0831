#pragma once
// The data sets the tools know (cifar10, fashion-mnist, mnist, folder), each with its standard
// transforms: qflow-train trains on them, qflow-show-data pictures them exactly as loaded.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/data/data.h"

namespace qflow::tools {

/// Which data set, where, and how much of it.
struct DataOptions {
  std::string dataset = "cifar10";  // cifar10 | fashion-mnist | mnist | folder
  std::string data;                 // directory (or CIFAR .tar.gz); empty = the dataset's default
  bool augment = true;              // random crop (+ flip) in the training transform
  int64_t subset = 0;               // keep the first N training samples (0 = all)
  int64_t test_subset = 0;          // keep the first N test samples (0 = all)
  bool load_train = true, load_test = true;  // a tool that shows one split skips reading the other
};

struct DataSetup {
  std::shared_ptr<const data::Dataset> train, test;  // null when not loaded
  data::TransformPtr train_transform, test_transform;
  /// The Normalize both transforms end with (viz::make_image_grid undoes it for display).
  std::vector<double> mean, std;
  int64_t channels = 3, image_size = 32;
  /// Class names of the loaded split(s).
  const std::vector<std::string>& class_names() const { return (train ? train : test)->class_names(); }
  /// Classes of the loaded split(s).
  int64_t num_classes() const { return (train ? train : test)->num_classes(); }
};

/// Loads the split(s) `o` asks for; errors (missing --data, unreadable files) are qflow::Errors.
DataSetup make_data(const DataOptions& o);

/// The data sets make_data knows: cifar10, fashion-mnist, mnist, folder.
const std::vector<std::string>& dataset_names();

}  // namespace qflow::tools
