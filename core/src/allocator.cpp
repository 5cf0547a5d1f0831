// The caching allocator. See Note [Caching allocator].
#include "qflow/core/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "qflow/core/error.h"
#include "qflow/core/storage.h"

namespace qflow {
namespace {

// Rounds up to a multiple of the alignment, then (for cached sizes) to 1/8 of the largest
// power of two not above it, so near sizes share a class.
size_t size_class(size_t nbytes) {
  const size_t aligned = std::max<size_t>(kStorageAlignment, (nbytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment);
  if (aligned < kCachedMinBytes) return aligned;
  size_t power = size_t{1} << (63 - __builtin_clzll(aligned));
  const size_t step = power / 8;
  return (aligned + step - 1) / step * step;
}

// Under AddressSanitizer every block goes back to the system, so a use after free is caught
// instead of reading a recycled block.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

size_t default_limit() {
  if (kSanitized) return 0;
  if (const char* env = std::getenv("QFLOW_CACHE_LIMIT_MB")) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<size_t>(mb) << 20;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return size_t{1} << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page) / 4;
}

void* system_allocate(size_t bytes) {
  void* p = std::aligned_alloc(kStorageAlignment, bytes);
  QFLOW_CHECK(p != nullptr, "out of memory allocating {} bytes", bytes);
  return p;
}

class CachingAllocator {
 public:
  void* allocate(size_t nbytes) {
    const size_t bytes = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.in_use_bytes += bytes;
      stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
      if (bytes >= kCachedMinBytes) {
        ++stats_.requests;
        auto it = free_.find(bytes);
        if (it != free_.end() && !it->second.empty()) {
          void* p = it->second.back();
          it->second.pop_back();
          ++stats_.hits;
          stats_.cached_bytes -= bytes;
          return p;
        }
      }
    }
    try {
      return system_allocate(bytes);
    } catch (...) {
      // Out of memory: hand the cache back to the system and try once more.
      empty();
      try {
        return system_allocate(bytes);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.in_use_bytes -= bytes;
        throw;
      }
    }
  }

  void free(void* p, size_t nbytes) {
    const size_t bytes = size_class(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.in_use_bytes -= bytes;
      if (bytes >= kCachedMinBytes && stats_.cached_bytes + bytes <= stats_.cache_limit_bytes) {
        free_[bytes].push_back(p);
        stats_.cached_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.requests = stats_.hits = 0;
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
  }

  void empty() { evict_to(0); }

  void set_limit(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.cache_limit_bytes = bytes;
    }
    evict_to(bytes);
  }

 private:
  // Frees cached blocks, largest classes first, until at most `cap` free bytes remain.
  void evict_to(size_t cap) {
    std::vector<void*> victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<size_t> classes;
      for (const auto& [bytes, list] : free_)
        if (!list.empty()) classes.push_back(bytes);
      std::sort(classes.rbegin(), classes.rend());
      for (size_t bytes : classes) {
        auto& list = free_[bytes];
        while (!list.empty() && stats_.cached_bytes > cap) {
          victims.push_back(list.back());
          list.pop_back();
          stats_.cached_bytes -= bytes;
        }
      }
    }
    for (void* p : victims) std::free(p);
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_{.cache_limit_bytes = default_limit()};
};

// Never destroyed: storages owned by static objects may be freed after main returns.
CachingAllocator& allocator() {
  static auto* instance = new CachingAllocator();
  return *instance;
}

}  // namespace

void* allocator_allocate(size_t nbytes) { return allocator().allocate(nbytes); }
void allocator_free(void* p, size_t nbytes) { allocator().free(p, nbytes); }
AllocatorStats allocator_stats() { return allocator().stats(); }
void reset_allocator_stats() { allocator().reset_stats(); }
void empty_allocator_cache() { allocator().empty(); }
void set_allocator_cache_limit(size_t bytes) { allocator().set_limit(bytes); }

}  // namespace qflow
