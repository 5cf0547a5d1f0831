#pragma once
// Per-device state of the CUDA backend: the compute stream and the library handles bound to
// it (Note [CUDA backend]). Host code only; kernels get the stream as an argument.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>

#include "qflow/core/device.h"
#include "qflow/core/storage.h"

namespace qflow::cuda {

/// Devices present; 0 when the machine has no usable GPU or driver (never throws).
int device_count();
/// Why device_count() is 0 ("cudaGetDeviceCount: cudaErrorInsufficientDriver (35): ..."),
/// empty when there are devices.
const std::string& unavailable_reason();

/// Makes `device` the calling thread's current CUDA device for the guard's lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// The device's one compute stream: every kernel, library call and copy of qflow runs on it,
/// in order, so no operation needs an event to wait for another (created on first use).
cudaStream_t stream(Device device);
/// True while a graph is being captured on stream(device) (Note [Captured device work]): work
/// that reads back to the host or draws random numbers refuses then, saying why.
bool capturing(Device device);
/// Throws qflow::Error "`what` cannot be recorded into a CUDA graph: `why`" while capturing(device).
void check_not_capturing(Device device, const char* what, const char* why);
/// Library handles bound to stream(device), created on first use.
cudnnHandle_t cudnn(Device device);
cublasHandle_t cublas(Device device);
cublasLtHandle_t cublas_lt(Device device);

/// Scratch device memory for one library call (cuDNN and cuBLASLt workspaces): a block from
/// the caching allocator, returned when the Storage dies. Stream order makes the reuse safe.
std::shared_ptr<Storage> workspace(size_t nbytes, Device device);

}  // namespace qflow::cuda
