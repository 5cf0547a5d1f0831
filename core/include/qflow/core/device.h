#pragma once
// Where a tensor's elements live: the CPU or one CUDA device. See Note [Devices].
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace qflow {

/// Note [Devices]
/// Every Storage, hence every tensor, lives on one device: `Device::cpu()` or `Device::cuda(i)`.
/// A tensor's device is its storage's; views share it. An op runs the kernel registered for its
/// tensors' device (Note [Kernels per device]) and refuses tensors on two devices, naming the op
/// and both. Moving data is explicit (`t.to(device)`, `module.to(device)`); only reading values
/// on the host (`.item()`, `.to(Device::cpu())`, printing, to_vector) waits for the device.
/// Core knows devices other than the CPU only through the DeviceRuntime that a backend layer
/// registers (device_runtime.h); without one, asking for such a device says how to get it.
enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(static_cast<int8_t>(index)) {}
  static constexpr Device cpu() { return Device(); }
  static Device cuda(int index = 0);
  /// "cpu", "cuda" (device 0) or "cuda:<i>"; anything else is an error listing the forms.
  static Device parse(std::string_view text);

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  /// "cpu" or "cuda:0".
  std::string str() const;

  constexpr bool operator==(const Device&) const = default;

 private:
  DeviceType type_ = DeviceType::CPU;
  int8_t index_ = 0;
};

/// "cpu" or "cuda".
std::string_view device_type_name(DeviceType type);

}  // namespace qflow

template <>
struct fmt::formatter<qflow::Device> : fmt::formatter<std::string_view> {
  auto format(const qflow::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
