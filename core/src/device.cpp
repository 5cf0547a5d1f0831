#include "qflow/core/device.h"

#include <array>
#include <atomic>
#include <charconv>

#include "qflow/core/device_runtime.h"
#include "qflow/core/error.h"

namespace qflow {

Device Device::cuda(int index) {
  QFLOW_CHECK(index >= 0 && index < 128, "Device::cuda: index {} out of range [0, 128)", index);
  return Device(DeviceType::CUDA, index);
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda" || text == "gpu") return cuda(0);
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0) return cuda(index);
  }
  QFLOW_FAIL("unknown device '{}': expected 'cpu', 'cuda' or 'cuda:<index>'", text);
}

std::string_view device_type_name(DeviceType type) { return type == DeviceType::CPU ? "cpu" : "cuda"; }

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("{}:{}", device_type_name(type_), index_);
}

namespace {
std::array<DeviceRuntime*, kNumDeviceTypes>& runtimes() {
  static std::array<DeviceRuntime*, kNumDeviceTypes> r{};
  return r;
}
}  // namespace

void register_device_runtime(DeviceType type, DeviceRuntime* runtime) {
  QFLOW_ASSERT(type != DeviceType::CPU, "the cpu needs no device runtime");
  runtimes()[static_cast<int>(type)] = runtime;
}

bool has_device_runtime(DeviceType type) { return runtimes()[static_cast<int>(type)] != nullptr; }

DeviceRuntime& device_runtime(Device device) {
  DeviceRuntime* r = runtimes()[static_cast<int>(device.type())];
  QFLOW_CHECK(r != nullptr,
              "{}: this qflow was built without its CUDA backend. Build it on a machine with the CUDA "
              "toolkit and cuDNN: tools/build -DQFLOW_CUDA=ON (README, 'GPUs')",
              device);
  r->check_usable(device);
  return *r;
}

int device_count(DeviceType type) {
  if (type == DeviceType::CPU) return 1;
  DeviceRuntime* r = runtimes()[static_cast<int>(type)];
  return r ? r->device_count() : 0;
}

namespace {
std::atomic<bool> g_allow_tf32{true};
}  // namespace
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

namespace {
std::atomic<bool> g_deterministic{false};
}  // namespace
void set_deterministic_algorithms(bool on) { g_deterministic.store(on, std::memory_order_relaxed); }
bool deterministic_algorithms() { return g_deterministic.load(std::memory_order_relaxed); }

void synchronize(Device device) {
  if (!device.is_cpu()) device_runtime(device).synchronize(device);
}

// Note [Pinned batches]
// A copy from ordinary (pageable) host memory to a GPU goes through a staging buffer the driver
// copies into first, and the call returns only when the source was read: the host waits for
// every batch. From page-locked memory the copy is one DMA transfer queued on the device's
// stream, and the host goes on (PyTorch's pin_memory). The DataLoader builds its batches in
// such memory when asked (DataLoaderOptions::pin_memory; qflow-train --device cuda does), so
// moving a batch costs the host nothing and overlaps the previous step's kernels. A pinned
// block is handed out again only when the copies queued from it are done (the runtime records
// an event when it is freed), so a worker never overwrites a batch still in flight.
Tensor empty_pinned(const std::vector<int64_t>& sizes, DType dtype, Device for_device) {
  QFLOW_CHECK(!for_device.is_cpu(), "empty_pinned: page-locked memory is for copies to a device, not to the cpu");
  DeviceRuntime& runtime = device_runtime(for_device);
  const int64_t n = checked_numel(sizes, "empty_pinned");
  const size_t nbytes = static_cast<size_t>(n) * element_size(dtype);
  void* p = runtime.allocate_pinned(nbytes);
  auto storage = Storage::wrap(p, nbytes, [&runtime, nbytes](void* q) { runtime.free_pinned(q, nbytes); });
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

}  // namespace qflow
