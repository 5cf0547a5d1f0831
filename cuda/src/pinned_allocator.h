#pragma once
// Page-locked host memory for copies to the GPU (Note [Pinned batches]).
#include <cstddef>
#include <utility>
#include <vector>

namespace qflow::cuda {

/// cudaHostAlloc costs milliseconds (it maps the pages for the device), so freed blocks are kept
/// by size class (CachingAllocator::round_size) and reused. A block freed while a copy queued
/// from it may still be running carries an event recorded on every device stream in use; it is
/// reused only when those events completed.
class PinnedAllocator {
 public:
  static PinnedAllocator& instance();
  void* allocate(size_t nbytes);
  void free(void* p, size_t nbytes);

  /// While a graph is captured, freed blocks are held, not cached: a recorded copy reads them at
  /// every replay, and the events that track copies cannot be recorded into a capture. The graph
  /// takes the held blocks with end_holding and frees them when it dies.
  void begin_holding();
  std::vector<std::pair<void*, size_t>> end_holding();
};

}  // namespace qflow::cuda
