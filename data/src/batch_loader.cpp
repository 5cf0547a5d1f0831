#include "qflow/data/batch_loader.h"

namespace qflow::data {

BatchLoader::Iterator::Iterator(BatchLoader* loader) : loader_(loader) {
  loader_->start_epoch();
  ++*this;
}

BatchLoader::Iterator& BatchLoader::Iterator::operator++() {
  std::optional<Batch> b = loader_->next();
  if (b) {
    batch_ = std::move(*b);
  } else {
    loader_ = nullptr;
    batch_ = Batch();
  }
  return *this;
}

}  // namespace qflow::data
