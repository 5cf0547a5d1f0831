#pragma once
// What core needs from a device other than the CPU: memory and copies. See Note [Devices].
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "qflow/core/device.h"
#include "qflow/core/device_graph.h"
#include "qflow/core/tensor.h"

namespace qflow {

/// A device allocator's counters (bytes), like torch.cuda.memory_stats' headline figures.
struct DeviceMemoryStats {
  uint64_t allocated = 0;       // handed out to tensors now
  uint64_t reserved = 0;        // held from the device: allocated + cached
  uint64_t peak_allocated = 0;  // the most allocated at once since the last reset
  uint64_t requests = 0;        // allocations served
  uint64_t cache_hits = 0;      // ... from the cache
};

/// Note [Collectives on a device]
/// Data-parallel training on GPUs reduces gradients where they are: a device communicator (the
/// CUDA backend's is NCCL, loaded when first asked for) queues its collectives on the device's
/// stream like kernels, so a reduction is ordered after the backward ops that made its input
/// and before the optimizer step that reads it, and the host does not wait. Rank 0 makes an id
/// (new_communicator_id), the process group sends it to the others over MPI, and every rank
/// creates its communicator from it (collectively). A communicator's collectives run in the
/// order they are queued, so every rank must queue them in the same order — what data-parallel
/// programs do (Note [Process group]).
enum class CollectiveOp { Sum, Min, Max };

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  /// `t` (contiguous, on the communicator's device) reduced over the ranks, in place; queued.
  virtual void all_reduce(Tensor& t, CollectiveOp op) = 0;
  /// Rank `root`'s `t` into every rank's `t`, in place; queued.
  virtual void broadcast(Tensor& t, int root) = 0;
};

/// Implemented by a backend layer (the CUDA one: cuda/src/runtime.cpp) and registered at
/// start-up. Every call names a device of the runtime's type; errors are qflow::Error.
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  /// Devices present (0 when the machine has none; never throws).
  virtual int device_count() const = 0;
  /// Throws qflow::Error saying why `device` cannot be used (no driver, no such device, ...).
  virtual void check_usable(Device device) const = 0;
  /// Device memory of at least `nbytes` (from the backend's caching allocator).
  virtual void* allocate(size_t nbytes, Device device) = 0;
  /// Returns a block from allocate(nbytes, device); the memory may still be in use by queued
  /// work on the device's stream, which the allocator accounts for.
  virtual void free(void* p, size_t nbytes, Device device) = 0;
  /// Copies `nbytes` between any two of (host memory, a device of this runtime). A copy to the
  /// host returns when the bytes are there; any other copy is queued on the device's stream.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = 0;
  /// Waits for every queued operation on `device`.
  virtual void synchronize(Device device) = 0;
  /// The device's name ("NVIDIA H100 80GB HBM3").
  virtual std::string device_name(Device device) const = 0;
  virtual DeviceMemoryStats memory_stats(Device device) const = 0;
  /// Zeroes peak_allocated (to allocated), requests and cache_hits.
  virtual void reset_peak_memory_stats(Device device) = 0;
  /// Returns every cached free block to the device.
  virtual void empty_cache(Device device) = 0;
  /// Page-locked host memory (Note [Pinned batches]): copies from it to a device are DMA
  /// transfers queued on the device's stream, with no staging copy on the host.
  virtual void* allocate_pinned(size_t nbytes) = 0;
  /// Returns a block from allocate_pinned(nbytes); it is reused only once every copy queued
  /// from it has finished.
  virtual void free_pinned(void* p, size_t nbytes) = 0;
  /// Records the work `work` queues on `device` (Note [Captured device work]).
  virtual std::unique_ptr<DeviceGraph> capture(Device device, const std::function<void()>& work) = 0;
  /// A new communicator id (bytes) for rank 0 to send to every rank (Note [Collectives on a
  /// device]); throws saying why where the backend has no collectives (no NCCL).
  virtual std::string new_communicator_id() = 0;
  /// This rank's communicator of `size` ranks, one device each, from rank 0's id. Collective:
  /// returns when every rank has joined.
  virtual std::unique_ptr<DeviceCommunicator> communicator(Device device, int rank, int size, const std::string& id) = 0;
};

/// Registers the runtime for `type` (called once, from the backend's static initialiser).
void register_device_runtime(DeviceType type, DeviceRuntime* runtime);
/// The runtime serving `device`, after checking the device is usable. Throws qflow::Error
/// naming what is missing: a build without the backend, a machine without the device.
DeviceRuntime& device_runtime(Device device);
/// True when qflow was built with a backend for `type` (says nothing about the machine).
bool has_device_runtime(DeviceType type);
/// Number of devices of `type` on this machine (0 without the backend or the hardware).
int device_count(DeviceType type);

/// Waits until every queued operation on `device` finished (no-op on the CPU).
void synchronize(Device device);

/// A CPU tensor (row-major, uninitialised) in page-locked memory of `for_device`'s runtime, for
/// data on its way to that device (Note [Pinned batches]). Throws like device_runtime().
Tensor empty_pinned(const std::vector<int64_t>& sizes, DType dtype, Device for_device);

/// Note [TF32]
/// Ampere and later GPUs multiply float32 in TF32 (10-bit mantissa, float32 range) at several
/// times the speed of full float32. As PyTorch does by default for convolutions, qflow lets
/// cuDNN use TF32 in convolutions (and cuBLAS in linear layers) unless strict float32 is asked
/// for: tests comparing GPU and CPU kernels set it, so their tolerance is float32's. The CPU
/// ignores the setting.
void set_allow_tf32(bool allow);
bool allow_tf32();

/// Note [Deterministic algorithms]
/// Some of cuDNN's fastest backward convolutions add partial sums with atomics, so two runs of
/// one step differ in the last bits. With deterministic algorithms on (off by default, like
/// torch.use_deterministic_algorithms), cuDNN's algorithm search keeps only those that give the
/// same bits every run; qflow's own kernels never use atomics. Tests that compare two GPU runs
/// bit for bit (a replayed graph against the eager step) turn it on. The CPU ignores it.
void set_deterministic_algorithms(bool on);
bool deterministic_algorithms();

}  // namespace qflow
