#include "qflow/core/storage.h"

#include <cstdlib>
#include <new>

#include "qflow/core/error.h"

namespace qflow {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment; never ask for 0 bytes.
  const size_t rounded = (nbytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
  void* p = std::aligned_alloc(kStorageAlignment, rounded == 0 ? kStorageAlignment : rounded);
  QFLOW_CHECK(p != nullptr, "out of memory allocating {} bytes", nbytes);
  return std::make_shared<Storage>(p, nbytes, [](void* q) { std::free(q); });
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
