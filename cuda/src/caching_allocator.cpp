#include "caching_allocator.h"

#include <array>
#include <bit>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "context.h"
#include "cuda_check.h"
#include "qflow/core/error.h"

namespace qflow::cuda {

namespace {

constexpr int kMaxDevices = 16;
constexpr size_t kMinBlock = 512;
constexpr size_t kLargeBlock = size_t{1} << 20;

struct Pool {
  mutable std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by size class
  DeviceMemoryStats stats;
};

std::array<Pool, kMaxDevices>& pools() {
  static auto* p = new std::array<Pool, kMaxDevices>();  // outlives static tensors freed at exit
  return *p;
}

Pool& pool(Device device) {
  QFLOW_ASSERT(device.is_cuda() && device.index() < kMaxDevices, "no CUDA memory pool for {}", device);
  return pools()[static_cast<size_t>(device.index())];
}

// Frees every cached block of `p` (its mutex held).
void release_cached(Pool& p, Device device) {
  DeviceGuard guard(device);
  for (auto& [size, blocks] : p.free_blocks) {
    for (void* b : blocks) {
      cudaFree(b);
      p.stats.reserved -= size;
    }
  }
  p.free_blocks.clear();
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator a;
  return a;
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes <= kMinBlock) return kMinBlock;
  if (nbytes < kLargeBlock) return (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  const size_t step = std::bit_floor(nbytes) / 8;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t nbytes, Device device) {
  const size_t size = round_size(nbytes);
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  ++p.stats.requests;
  auto& blocks = p.free_blocks[size];
  void* block = nullptr;
  if (!blocks.empty()) {
    block = blocks.back();
    blocks.pop_back();
    ++p.stats.cache_hits;
  } else {
    DeviceGuard guard(device);
    cudaError_t status = cudaMalloc(&block, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached(p, device);
      status = cudaMalloc(&block, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo(&free_bytes, &total);
      QFLOW_FAIL("{}: out of memory allocating {} ({}: {}); qflow holds {} for tensors, the device has {} free of {}",
                 device, mib(size), cudaGetErrorName(status), cudaGetErrorString(status), mib(p.stats.allocated),
                 mib(free_bytes), mib(total));
    }
    p.stats.reserved += size;
  }
  p.stats.allocated += size;
  if (p.stats.allocated > p.stats.peak_allocated) p.stats.peak_allocated = p.stats.allocated;
  return block;
}

void CachingAllocator::free(void* block, size_t nbytes, Device device) {
  const size_t size = round_size(nbytes);
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  p.stats.allocated -= size;
  p.free_blocks[size].push_back(block);
}

DeviceMemoryStats CachingAllocator::stats(Device device) const {
  const Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  return p.stats;
}

void CachingAllocator::reset_peak(Device device) {
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  p.stats.peak_allocated = p.stats.allocated;
  p.stats.requests = 0;
  p.stats.cache_hits = 0;
}

void CachingAllocator::empty_cache(Device device) {
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  release_cached(p, device);
}

}  // namespace qflow::cuda
