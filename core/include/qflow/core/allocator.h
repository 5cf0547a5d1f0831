#pragma once
// The caching allocator behind Storage::allocate. See Note [Caching allocator].
#include <cstddef>
#include <cstdint>

namespace qflow {

/// Note [Caching allocator]
/// A training step allocates the same large buffers (activations, gradients, conv column
/// buffers) every step. Served by malloc, each buffer above glibc's mmap threshold comes
/// fresh from the kernel and is zero-filled page by page on first touch: measured 8-10 % of a
/// ResNet18 training step in page faults and clear_page (perf). So freed blocks of at least
/// kCachedMinBytes go back to a free list of their size class (sizes rounded up to 1/8 of their
/// power of two, at most 12.5 % slack) and the next request of that class reuses them. Smaller
/// blocks go to malloc, which already recycles them from its arenas.
/// The cache never holds more than its limit of free bytes (default: a quarter of physical
/// memory; QFLOW_CACHE_LIMIT_MB overrides, 0 turns caching off); a block that would exceed it
/// is returned to the system, and empty_allocator_cache() returns all of them.
inline constexpr size_t kCachedMinBytes = size_t{64} << 10;

struct AllocatorStats {
  uint64_t requests = 0;       // allocations of at least kCachedMinBytes
  uint64_t hits = 0;           // ... served from the cache
  uint64_t cached_bytes = 0;   // free bytes held by the cache now
  uint64_t in_use_bytes = 0;   // bytes handed out (all sizes, rounded) and not yet freed
  uint64_t peak_in_use_bytes = 0;
  uint64_t cache_limit_bytes = 0;
  double hit_rate() const { return requests == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(requests); }
};

/// Allocates at least `nbytes` (rounded up to the size class), aligned to 64 bytes
/// (kStorageAlignment). Throws qflow::Error when the system is out of memory.
void* allocator_allocate(size_t nbytes);
/// Returns a block from allocator_allocate(nbytes, ...) (the same nbytes).
void allocator_free(void* p, size_t nbytes);

AllocatorStats allocator_stats();
/// Zeroes the counters (requests, hits, peak); the cache keeps its blocks.
void reset_allocator_stats();
/// Returns every cached free block to the system.
void empty_allocator_cache();
/// Caps the free bytes the cache may hold (0 disables caching), evicting down to the new cap.
void set_allocator_cache_limit(size_t bytes);

}  // namespace qflow
