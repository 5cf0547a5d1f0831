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
///
/// Note [Graph memory pools]
/// A captured graph (Note [Captured device work]) replays its kernels on the addresses they had
/// at capture, long after the tensors there died. So while a graph is captured on a device,
/// every allocation on it comes from a pool of that graph's own: blocks freed during the capture
/// are reused within it (stream order is graph order: the capture is one stream), and blocks the
/// capture made that are freed later go back to that pool, never to the shared cache. A block
/// allocated before the capture and freed during it may still be read by the recorded kernels:
/// the pool holds it too. When the graph dies, release_pool returns the pool's free and held
/// blocks to the cache, and its blocks still in use go there when they are freed. Replays
/// queued before that run first (one stream), so reuse stays safe.
class CachingAllocator {
 public:
  static CachingAllocator& instance();

  void* allocate(size_t nbytes, Device device);
  void free(void* p, size_t nbytes, Device device);
  DeviceMemoryStats stats(Device device) const;
  void reset_peak(Device device);
  void empty_cache(Device device);

  /// Routes `device`'s allocations to a new graph pool until end_capture; returns its id.
  uint64_t begin_capture(Device device);
  void end_capture(Device device);
  /// The graph of pool `id` died (Note [Graph memory pools]).
  void release_pool(Device device, uint64_t id);
  /// The id of the graph being captured on `device` (its pool's), 0 when none is.
  uint64_t capture_in_progress(Device device) const;

  /// The size class `nbytes` is served from.
  static size_t round_size(size_t nbytes);
};

}  // namespace qflow::cuda
