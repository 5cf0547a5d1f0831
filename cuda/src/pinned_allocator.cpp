#include "pinned_allocator.h"

#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "caching_allocator.h"
#include "context.h"
#include "cuda_check.h"
#include "qflow/core/error.h"

namespace qflow::cuda {

namespace {

struct FreeBlock {
  void* p;
  std::vector<cudaEvent_t> events;  // one per device stream the copies may have used
};

struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::deque<FreeBlock>> free_blocks;  // by size class, oldest first
  std::vector<cudaEvent_t> spare_events;
};

Pool& pool() {
  static auto* p = new Pool();  // outlives static tensors freed at exit
  return *p;
}

bool done(const FreeBlock& b) {
  for (cudaEvent_t e : b.events) {
    const cudaError_t status = cudaEventQuery(e);
    if (status == cudaErrorNotReady) return false;
    QFLOW_CUDA_CHECK(status, "pinned memory");
  }
  return true;
}

}  // namespace

PinnedAllocator& PinnedAllocator::instance() {
  static PinnedAllocator a;
  return a;
}

void* PinnedAllocator::allocate(size_t nbytes) {
  const size_t size = CachingAllocator::round_size(nbytes);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    auto& blocks = p.free_blocks[size];
    if (!blocks.empty() && done(blocks.front())) {
      FreeBlock b = blocks.front();
      blocks.pop_front();
      for (cudaEvent_t e : b.events) p.spare_events.push_back(e);
      return b.p;
    }
  }
  void* block = nullptr;
  QFLOW_CUDA_CHECK(cudaHostAlloc(&block, size, cudaHostAllocPortable), "pinned memory (cudaHostAlloc)");
  return block;
}

void PinnedAllocator::free(void* block, size_t nbytes) {
  const size_t size = CachingAllocator::round_size(nbytes);
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  FreeBlock b{block, {}};
  for (int d = 0; d < device_count(); ++d) {
    const Device device = Device::cuda(d);
    DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    if (!p.spare_events.empty()) {
      e = p.spare_events.back();
      p.spare_events.pop_back();
    } else {
      QFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "pinned memory");
    }
    QFLOW_CUDA_CHECK(cudaEventRecord(e, stream(device)), "pinned memory");
    b.events.push_back(e);
  }
  p.free_blocks[size].push_back(b);
}

}  // namespace qflow::cuda
