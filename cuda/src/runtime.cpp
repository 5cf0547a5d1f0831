// The CUDA DeviceRuntime: what core asks of a device (Note [Devices]), registered at start-up.
//
// Note [CUDA backend]
// The CUDA backend is one more layer, `cuda/`, above core and below everything else, built
// only when CMake finds the CUDA toolkit and cuDNN (cmake/QflowCuda.cmake, QFLOW_CUDA). It
// registers (1) this runtime — the caching allocator (Note [CUDA caching allocator]), copies
// between host and device, synchronisation — and (2) a CUDA kernel for each op it implements
// (Note [Kernels per device]). It links the CUDA runtime statically and never the driver
// library: a qflow built with CUDA starts on a machine without a GPU or driver, and there
// cudaGetDeviceCount's error is the reason every CUDA request gives. Kernels are launched on
// the device's one compute stream (cuda/src/context.h), so nothing waits for the device but
// the copies to the host (.item(), .to(cpu), printing) and synchronize().
#include "caching_allocator.h"
#include "communicator.h"
#include "context.h"
#include "cuda_check.h"
#include "graph.h"
#include "pinned_allocator.h"
#include "qflow/core/device_runtime.h"
#include "qflow/core/error.h"

namespace qflow::cuda {
namespace {

class CudaRuntime final : public DeviceRuntime {
 public:
  int device_count() const override { return cuda::device_count(); }

  void check_usable(Device device) const override {
    const int count = cuda::device_count();
    QFLOW_CHECK(count > 0, "{}: no usable CUDA device on this machine ({}); keep tensors and modules on the cpu",
                device, unavailable_reason());
    QFLOW_CHECK(device.index() < count, "{}: no such CUDA device (this machine has {}: cuda:0..cuda:{})", device,
                count, count - 1);
  }

  void* allocate(size_t nbytes, Device device) override { return CachingAllocator::instance().allocate(nbytes, device); }
  void free(void* p, size_t nbytes, Device device) override { CachingAllocator::instance().free(p, nbytes, device); }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) override {
    // Ordered after the work queued on the device that holds the data.
    const Device device = src_device.is_cuda() ? src_device : dst_device;
    DeviceGuard guard(device);
    if (dst_device.is_cpu())
      check_not_capturing(device, "a copy to the host (.item(), .cpu(), printing)",
                          "a graph's replay returns before its work is done; read the output after replay()");
    if (src_device.is_cpu())
      check_not_capturing(device, "a copy from host memory",
                          "the recorded copy would read the same host bytes at every replay; put the data on the "
                          "device before capturing and copy_ into it");
    cudaStream_t s = stream(device);
    if (src_device.is_cuda() && dst_device.is_cuda() && src_device != dst_device) {
      // The destination's stream may still use the block (a freed one reused by the caching
      // allocator) and runs the ops that read the copy: the copy waits for the work queued
      // there, and that stream's later work waits for the copy.
      cudaStream_t d = stream(dst_device);
      cudaEvent_t before = nullptr, after = nullptr;
      {
        DeviceGuard dst_guard(dst_device);
        QFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&before, cudaEventDisableTiming), "to_device");
        QFLOW_CUDA_CHECK(cudaEventRecord(before, d), "to_device");
      }
      QFLOW_CUDA_CHECK(cudaStreamWaitEvent(s, before, 0), "to_device");
      QFLOW_CUDA_CHECK(cudaEventDestroy(before), "to_device");  // released once it completed
      QFLOW_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), nbytes, s), "to_device");
      QFLOW_CUDA_CHECK(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "to_device");
      QFLOW_CUDA_CHECK(cudaEventRecord(after, s), "to_device");
      {
        DeviceGuard dst_guard(dst_device);
        QFLOW_CUDA_CHECK(cudaStreamWaitEvent(d, after, 0), "to_device");
      }
      QFLOW_CUDA_CHECK(cudaEventDestroy(after), "to_device");
    } else {
      QFLOW_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, s), "to_device");
    }
    // A copy to the host returns with the bytes there; from pageable host memory, cudaMemcpyAsync
    // has read the source before it returns, so the caller may free it.
    if (dst_device.is_cpu()) QFLOW_CUDA_CHECK(cudaStreamSynchronize(s), "to_device");
  }

  void synchronize(Device device) override {
    DeviceGuard guard(device);
    check_not_capturing(device, "synchronize()", "a replay is queued like one kernel; wait for it after replay()");
    QFLOW_CUDA_CHECK(cudaStreamSynchronize(stream(device)), "synchronize");
  }

  std::string device_name(Device device) const override {
    cudaDeviceProp prop{};
    QFLOW_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.index()), "device_name");
    return prop.name;
  }

  DeviceMemoryStats memory_stats(Device device) const override { return CachingAllocator::instance().stats(device); }
  void reset_peak_memory_stats(Device device) override { CachingAllocator::instance().reset_peak(device); }
  void empty_cache(Device device) override {
    synchronize(device);
    CachingAllocator::instance().empty_cache(device);
  }

  void* allocate_pinned(size_t nbytes) override {
    check_usable(Device::cuda(0));
    return PinnedAllocator::instance().allocate(nbytes);
  }
  void free_pinned(void* p, size_t nbytes) override { PinnedAllocator::instance().free(p, nbytes); }

  std::unique_ptr<DeviceGraph> capture(Device device, const std::function<void()>& work) override {
    check_usable(device);
    return cuda::capture(device, work);
  }

  std::string new_communicator_id() override { return cuda::new_communicator_id(); }
  std::unique_ptr<DeviceCommunicator> communicator(Device device, int rank, int size, const std::string& id) override {
    check_usable(device);
    return cuda::communicator(device, rank, size, id);
  }
};

struct Registrar {
  Registrar() {
    static CudaRuntime runtime;
    register_device_runtime(DeviceType::CUDA, &runtime);
  }
} registrar;

}  // namespace
}  // namespace qflow::cuda
