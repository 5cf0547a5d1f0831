#include "context.h"

#include <array>
#include <mutex>

#include "cuda_check.h"
#include "qflow/core/error.h"

namespace qflow::cuda {

namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t status = cudaGetDeviceCount(&r.count);
    if (status != cudaSuccess) {
      r.count = 0;
      r.reason = fmt::format("cudaGetDeviceCount: {} ({}): {}", cudaGetErrorName(status), static_cast<int>(status),
                             cudaGetErrorString(status));
      cudaGetLastError();
    } else if (r.count == 0) {
      r.reason = "cudaGetDeviceCount: no CUDA device";
    }
    return r;
  }();
  return p;
}

constexpr int kMaxDevices = 16;

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;
};

DeviceState& state(Device device) {
  static std::array<DeviceState, kMaxDevices> states;
  QFLOW_CHECK(device.is_cuda() && device.index() < kMaxDevices && device.index() < device_count(),
              "{}: not a CUDA device of this machine ({} found)", device, device_count());
  DeviceState& s = states[static_cast<size_t>(device.index())];
  std::call_once(s.once, [&] {
    DeviceGuard guard(device);
    // Non-blocking: the legacy default stream would serialise against other libraries' work.
    QFLOW_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    QFLOW_CUDNN_CHECK(cudnnCreate(&s.cudnn), "cudnnCreate");
    QFLOW_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream), "cudnnSetStream");
    QFLOW_CUBLAS_CHECK(cublasCreate(&s.cublas), "cublasCreate");
    QFLOW_CUBLAS_CHECK(cublasSetStream(s.cublas, s.stream), "cublasSetStream");
    QFLOW_CUBLAS_CHECK(cublasLtCreate(&s.cublas_lt), "cublasLtCreate");
    // The handles live as long as the process: destroying them from a static destructor would
    // race the CUDA runtime's own teardown.
  });
  return s;
}

}  // namespace

int device_count() { return probe().count; }
const std::string& unavailable_reason() { return probe().reason; }

DeviceGuard::DeviceGuard(Device device) {
  QFLOW_CUDA_CHECK(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device.index()) QFLOW_CUDA_CHECK(cudaSetDevice(device.index()), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_ && previous_ >= 0) cudaSetDevice(previous_);
}

cudaStream_t stream(Device device) { return state(device).stream; }
cudnnHandle_t cudnn(Device device) { return state(device).cudnn; }
cublasHandle_t cublas(Device device) { return state(device).cublas; }
cublasLtHandle_t cublas_lt(Device device) { return state(device).cublas_lt; }

bool capturing(Device device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  QFLOW_CUDA_CHECK(cudaStreamIsCapturing(stream(device), &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

void check_not_capturing(Device device, const char* what, const char* why) {
  QFLOW_CHECK(!capturing(device), "{} cannot be recorded into a CUDA graph on {}: {} (Note [Captured device work])",
              what, device, why);
}

std::shared_ptr<Storage> workspace(size_t nbytes, Device device) { return Storage::allocate(nbytes, device); }

}  // namespace qflow::cuda
