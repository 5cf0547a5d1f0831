#include "qflow/core/storage.h"

#include "qflow/core/allocator.h"
#include "qflow/core/device_runtime.h"

namespace qflow {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (!device.is_cpu()) {
    DeviceRuntime& runtime = device_runtime(device);
    void* p = runtime.allocate(nbytes, device);
    return std::make_shared<Storage>(p, nbytes, [&runtime, nbytes, device](void* q) { runtime.free(q, nbytes, device); },
                                     device);
  }
  void* p = allocator_allocate(nbytes);  // See Note [Caching allocator]
  return std::make_shared<Storage>(p, nbytes, [nbytes](void* q) { allocator_free(q, nbytes); });
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Deleter deleter, Device device) {
  return std::make_shared<Storage>(data, nbytes, std::move(deleter), device);
}

Storage::Storage(void* data, size_t nbytes, Deleter deleter, Device device)
    : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)), device_(device) {}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

}  // namespace qflow
