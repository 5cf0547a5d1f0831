#include "qflow/data/dataset.h"

#include <algorithm>
#include <numeric>

#include "qflow/core/error.h"

namespace qflow::data {

namespace detail {
void check_index(const char* dataset, int64_t index, int64_t size) {
  QFLOW_CHECK(index >= 0 && index < size, "{}: index {} out of range for a dataset of {} samples", dataset, index, size);
}
}  // namespace detail

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  QFLOW_CHECK(dataset_ != nullptr, "Subset: null dataset");
  for (int64_t i : indices_) detail::check_index("Subset", i, dataset_->size());
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, int64_t count) : dataset_(std::move(dataset)) {
  QFLOW_CHECK(dataset_ != nullptr, "Subset: null dataset");
  QFLOW_CHECK(count >= 0, "Subset: negative count {}", count);
  indices_.resize(static_cast<size_t>(std::min(count, dataset_->size())));
  std::iota(indices_.begin(), indices_.end(), int64_t{0});
}

Example Subset::get(int64_t index) const {
  detail::check_index("Subset", index, size());
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

}  // namespace qflow::data
