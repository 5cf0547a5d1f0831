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
  std::vector<cudaEvent_t> events;  // events[d]: recorded on device d's stream
};

struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::deque<FreeBlock>> free_blocks;  // by size class, oldest first
  // Completed events for reuse, by the device they were created on: cudaEventRecord needs the
  // event and the stream on one device.
  std::vector<std::vector<cudaEvent_t>> spare_events;
  bool holding = false;  // a graph is being captured: frees go to `held`
  std::vector<std::pair<void*, size_t>> held;
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
      if (p.spare_events.size() < b.events.size()) p.spare_events.resize(b.events.size());
      for (size_t d = 0; d < b.events.size(); ++d) p.spare_events[d].push_back(b.events[d]);
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
  if (p.holding) {
    p.held.emplace_back(block, nbytes);
    return;
  }
  FreeBlock b{block, {}};
  const int count = device_count();
  if (p.spare_events.size() < static_cast<size_t>(count)) p.spare_events.resize(static_cast<size_t>(count));
  // This runs in a Storage's destructor, which must not throw (and at exit the CUDA runtime may
  // be gone): a block whose copies cannot be tracked is never reused (it leaks).
  try {
    for (int d = 0; d < count; ++d) {
      const Device device = Device::cuda(d);
      DeviceGuard guard(device);
      auto& spare = p.spare_events[static_cast<size_t>(d)];
      cudaEvent_t e = nullptr;
      if (!spare.empty()) {
        e = spare.back();
        spare.pop_back();
      } else {
        QFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "pinned memory");
      }
      QFLOW_CUDA_CHECK(cudaEventRecord(e, stream(device)), "pinned memory");
      b.events.push_back(e);
    }
  } catch (const Error&) {
    return;
  }
  p.free_blocks[size].push_back(b);
}

void PinnedAllocator::begin_holding() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.holding = true;
}

std::vector<std::pair<void*, size_t>> PinnedAllocator::end_holding() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  p.holding = false;
  return std::exchange(p.held, {});
}

}  // namespace qflow::cuda
