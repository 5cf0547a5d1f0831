#pragma once
// Storage: a 64-byte aligned byte buffer shared by a tensor and all its views.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "qflow/core/device.h"

namespace qflow {

class Storage;

namespace detail {
/// While a device graph is captured on this thread, the storages whose version was bumped
/// (Note [Versions of captured writes]); null otherwise.
inline thread_local std::vector<std::weak_ptr<Storage>>* captured_version_bumps = nullptr;
}  // namespace detail

/// Alignment of every buffer qflow allocates (one cache line; enough for AVX-512 loads).
inline constexpr size_t kStorageAlignment = 64;

class Storage : public std::enable_shared_from_this<Storage> {
 public:
  using Deleter = std::function<void(void*)>;

  /// Allocates `nbytes` (zero allowed) on `device`, aligned to kStorageAlignment on the CPU
  /// (device allocators align at least as much). Contents are undefined.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device = Device::cpu());
  /// Wraps memory owned elsewhere; `deleter` (may be empty) runs when the storage dies.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Deleter deleter, Device device = Device::cpu());

  Storage(void* data, size_t nbytes, Deleter deleter, Device device = Device::cpu());
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  /// Where the bytes live (Note [Devices]); data() is a device address when not the CPU.
  Device device() const { return device_; }

  /// Version counter shared by all views of this storage: bumped by every in-place write,
  /// checked by autograd when it unpacks a saved tensor. See Note [Version counter].
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() {
    version_.fetch_add(1, std::memory_order_relaxed);
    if (detail::captured_version_bumps != nullptr) [[unlikely]]
      detail::captured_version_bumps->push_back(weak_from_this());
  }
  /// For storage that replaces another with the same values (an opaque tensor made plain).
  void set_version(uint64_t v) { version_.store(v, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Deleter deleter_;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace qflow
