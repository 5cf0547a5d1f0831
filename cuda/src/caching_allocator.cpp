#include "caching_allocator.h"

#include <array>
#include <bit>
#include <map>
#include <memory>
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

using FreeLists = std::unordered_map<size_t, std::vector<void*>>;  // by size class

// The memory of one captured graph (Note [Graph memory pools]).
struct GraphPool {
  FreeLists free_blocks;                       // made by the capture, free now
  std::vector<std::pair<void*, size_t>> held;  // from the cache, freed during the capture
  int64_t live = 0;                            // made by the capture, in use now
  bool released = false;                       // the graph died
};

struct Pool {
  mutable std::mutex mutex;
  FreeLists free_blocks;
  DeviceMemoryStats stats;
  std::map<uint64_t, GraphPool> graphs;             // by id
  std::unordered_map<void*, uint64_t> graph_owned;  // blocks of graph pools -> id
  uint64_t capturing = 0;                           // the pool allocations go to now (0: the cache)
  uint64_t next_id = 1;
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
  auto& blocks = p.capturing != 0 ? p.graphs.at(p.capturing).free_blocks[size] : p.free_blocks[size];
  void* block = nullptr;
  if (!blocks.empty()) {
    block = blocks.back();
    blocks.pop_back();
    ++p.stats.cache_hits;
  } else {
    DeviceGuard guard(device);
    cudaError_t status = cudaMalloc(&block, size);
    // cudaFree would break a capture: then the first failure is the answer.
    if (status == cudaErrorMemoryAllocation && p.capturing == 0) {
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
  if (p.capturing != 0) {
    p.graph_owned[block] = p.capturing;
    ++p.graphs.at(p.capturing).live;
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
  if (const auto owned = p.graph_owned.find(block); owned != p.graph_owned.end()) {
    GraphPool& g = p.graphs.at(owned->second);
    --g.live;
    if (!g.released) {
      g.free_blocks[size].push_back(block);
      return;
    }
    const uint64_t id = owned->second;
    p.graph_owned.erase(owned);
    if (g.live == 0) p.graphs.erase(id);
  } else if (p.capturing != 0) {
    p.graphs.at(p.capturing).held.emplace_back(block, size);
    return;
  }
  p.free_blocks[size].push_back(block);
}

uint64_t CachingAllocator::begin_capture(Device device) {
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  QFLOW_CHECK(p.capturing == 0, "{}: a graph is already being captured on this device", device);
  p.capturing = p.next_id++;
  p.graphs.emplace(p.capturing, GraphPool{});
  return p.capturing;
}

void CachingAllocator::end_capture(Device device) {
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  p.capturing = 0;
}

void CachingAllocator::release_pool(Device device, uint64_t id) {
  Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  const auto it = p.graphs.find(id);
  if (it == p.graphs.end()) return;
  GraphPool& g = it->second;
  for (auto& [size, blocks] : g.free_blocks) {
    for (void* b : blocks) {
      p.graph_owned.erase(b);
      p.free_blocks[size].push_back(b);
    }
  }
  for (const auto& [b, size] : g.held) p.free_blocks[size].push_back(b);
  g.free_blocks.clear();
  g.held.clear();
  g.released = true;
  if (g.live == 0) p.graphs.erase(it);
}

uint64_t CachingAllocator::capture_in_progress(Device device) const {
  const Pool& p = pool(device);
  std::lock_guard lock(p.mutex);
  return p.capturing;
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
