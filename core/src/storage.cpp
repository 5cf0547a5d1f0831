#include "qflow/core/storage.h"

#include "qflow/core/allocator.h"

namespace qflow {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  void* p = allocator_allocate(nbytes);  // See Note [Caching allocator]
  return std::make_shared<Storage>(p, nbytes, [nbytes](void* q) { allocator_free(q, nbytes); });
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Deleter deleter) {
  return std::make_shared<Storage>(data, nbytes, std::move(deleter));
}

Storage::Storage(void* data, size_t nbytes, Deleter deleter)
    : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace qflow
