#pragma once
// The train and test sets of a run, with the standard transforms for each data set.
#include <memory>

#include "qflow/data/data.h"
#include "train_options.h"

namespace qflow::tools {

struct DataSetup {
  std::shared_ptr<const data::Dataset> train, test;
  data::TransformPtr train_transform, test_transform;
  int64_t channels = 3, image_size = 32;
};

DataSetup make_data(const TrainOptions& o);

}  // namespace qflow::tools
