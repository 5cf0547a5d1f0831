#pragma once
// Dispatch keys: one bit per registered dispatch layer. See Note [Dispatch layers].
#include <bit>
#include <cstdint>

namespace qflow {

/// A layer's slot. Higher values run earlier (closer to the user's call).
using DispatchKey = uint8_t;
inline constexpr int kMaxDispatchKeys = 32;

// Every dispatch layer's key, in one list, from the kernels up (Note [Dispatch layers]). The
// layers live in other layers of the code; their keys live here, so their order is seen at once.
/// core (opaque_layout.h): converts oneDNN's opaque tensors for ops that cannot take them; runs
/// after every other layer, right before the kernel.
inline constexpr DispatchKey kOpaqueLayoutKey = 1;
/// autograd (grad_mode.h): records the backward graph, then computes below.
inline constexpr DispatchKey kAutogradKey = 8;
/// fx (trace.h): records a proxy's op in the graph; above autograd, so proxies are recorded,
/// never computed.
inline constexpr DispatchKey kTraceKey = 16;
/// core (op_profiler.h): times each op on the host; above every other layer, so an op's time
/// includes autograd's recording and, on a GPU, the kernel's launch.
inline constexpr DispatchKey kProfileKey = 28;

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(uint32_t bits) : bits_(bits) {}
  static constexpr DispatchKeySet of(DispatchKey k) { return DispatchKeySet(1u << k); }

  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool has(DispatchKey k) const { return (bits_ >> k) & 1u; }
  constexpr DispatchKeySet add(DispatchKey k) const { return DispatchKeySet(bits_ | (1u << k)); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return DispatchKeySet(bits_ & ~(1u << k)); }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return DispatchKeySet(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return DispatchKeySet(bits_ & o.bits_); }
  constexpr DispatchKeySet operator~() const { return DispatchKeySet(~bits_); }
  /// The key of the layer that runs first.
  constexpr DispatchKey highest() const { return static_cast<DispatchKey>(31 - std::countl_zero(bits_)); }
  constexpr uint32_t raw() const { return bits_; }

 private:
  uint32_t bits_ = 0;
};

}  // namespace qflow
