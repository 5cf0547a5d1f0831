// See Note [Gathered predictions].
#include "predictions.h"

#include <fmt/format.h>

#include <filesystem>
#include <numeric>

#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "run_log.h"

namespace qflow::tools {

PredictionRecorder::PredictionRecorder(const data::DataLoader& loader, int64_t classes)
    : images_(loader.dataset().size()), classes_(classes) {
  QFLOW_CHECK(!loader.options().shuffle, "--predictions: the evaluation loader must keep the test set's order");
  std::vector<int64_t> order(static_cast<size_t>(images_));
  std::iota(order.begin(), order.end(), int64_t{0});
  indices_ = loader.options().sampler.shard(order);
}

void PredictionRecorder::record(const Tensor& logits, const Tensor& labels) {
  QFLOW_CHECK(logits.dim() == 2 && labels.dim() == 1 && logits.sizes()[0] == labels.sizes()[0],
              "--predictions: expected logits (B, classes) and labels (B), got {} and {}", logits.sizes(), labels.sizes());
  const int64_t batch = logits.sizes()[0];
  QFLOW_CHECK(recorded_ + batch <= static_cast<int64_t>(indices_.size()),
              "--predictions: {} images recorded, but this process evaluates {}", recorded_ + batch, indices_.size());
  QFLOW_CHECK(logits.sizes()[1] == classes_, "--predictions: the model gives {} outputs for the data set's {} classes",
              logits.sizes()[1], classes_);
  const std::vector<double> probs = to_vector<double>(softmax(logits, 1).to(DType::Float64));
  const std::vector<int64_t> predicted = to_vector<int64_t>(logits.argmax(1));
  const std::vector<int64_t> label = to_vector<int64_t>(labels);
  for (int64_t i = 0; i < batch; ++i) {
    rows_.push_back(static_cast<double>(label[static_cast<size_t>(i)]));
    rows_.push_back(static_cast<double>(predicted[static_cast<size_t>(i)]));
    rows_.insert(rows_.end(), probs.begin() + i * classes_, probs.begin() + (i + 1) * classes_);
  }
  recorded_ += batch;
}

void PredictionRecorder::write_csv(const std::string& path, distributed::ProcessGroup& group) const {
  QFLOW_CHECK(recorded_ == static_cast<int64_t>(indices_.size()),
              "--predictions: {} of this process's {} test images were evaluated", recorded_, indices_.size());
  const int64_t width = 2 + classes_;
  std::vector<double> table(static_cast<size_t>(images_ * width), 0.0);
  for (size_t k = 0; k < indices_.size(); ++k)
    std::copy_n(rows_.begin() + static_cast<int64_t>(k) * width, width, table.begin() + indices_[k] * width);
  Tensor gathered = from_vector<double>(table, {images_, width});
  group.all_reduce(gathered, distributed::ReduceOp::Sum, "predictions");
  if (!group.is_root()) return;
  const double* t = gathered.data_ptr<double>();
  std::string csv = "index,label,predicted";
  for (int64_t c = 0; c < width - 2; ++c) csv += fmt::format(",prob_{}", c);
  csv += "\n";
  for (int64_t i = 0; i < images_; ++i) {
    const double* row = t + i * width;
    csv += fmt::format("{},{},{}", i, static_cast<int64_t>(row[0]), static_cast<int64_t>(row[1]));
    for (int64_t c = 2; c < width; ++c) csv += fmt::format(",{:.6g}", row[c]);
    csv += "\n";
  }
  replace_file(path, csv);
  fmt::print("qflow-train: predictions for {} test images written to {}\n", images_, path);
}

void check_predictions_path(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  QFLOW_CHECK(std::filesystem::is_directory(dir), "qflow-train: --predictions {}: the directory {} does not exist", path,
              dir.string());
}

}  // namespace qflow::tools
