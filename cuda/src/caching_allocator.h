#pragma once
// The device memory allocator. See Note [CUDA caching allocator].
#include <cstddef>
#include <cstdint>

#include "qflow/core/device.h"
#include "qflow/core/device_runtime.h"

namespace qflow::cuda {

/// Note [CUDA caching allocator]
/// cudaMalloc and cudaFree cost tens to hundreds of microseconds and cudaFree synchronises the
/// whole device, so a training step that allocated its activations from them would stall on
/// every layer. As on the CPU (Note [Caching allocator]), freed blocks go to a free list of
/// their size class and the next request of that class reuses them: sizes round up to 512
/// bytes, and above 1 MiB to 1/8 of their power of two (at most 12.5 % slack). Every kernel of
/// a device runs on its one stream (cuda/src/context.h), so a block freed while queued work
/// still reads it is only handed to work queued after that: stream order makes reuse safe
/// without events. A cudaMalloc that fails returns the cache to the device and tries once
/// more; a second failure is a qflow::Error with the request and the counters. Stats follow
/// torch.cuda.memory_stats: allocated, reserved (allocated + cached), peak allocated.
class CachingAllocator {
 public:
  static CachingAllocator& instance();

  void* allocate(size_t nbytes, Device device);
  void free(void* p, size_t nbytes, Device device);
  DeviceMemoryStats stats(Device device) const;
  void reset_peak(Device device);
  void empty_cache(Device device);

  /// The size class `nbytes` is served from.
  static size_t round_size(size_t nbytes);
};

}  // namespace qflow::cuda
