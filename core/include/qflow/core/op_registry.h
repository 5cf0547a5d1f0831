#pragma once
// The op registry: one entry per public op (name, schema, shape rule, CPU kernel).
//
// Note [Op registration]
// Each kernel family registers its ops from a static initialiser in its own file, written by
// tools/gen-ops from the ops' declarations (Note [One declaration per op]) and included at the
// file's end:
//
//   QFLOW_REGISTER_OPS(generated_core_arithmetic) {
//     registry.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", add_meta, add_kernel);
//   }
//
// where `Stack add_kernel(OpArgs& a)` reads `a.tensor("self")`, `a.scalar("alpha")` by the
// schema's names (Note [Arguments by name]), and the generated typed function names them too.
//
// Static libraries would drop such object files, so every target links qflow's layers as
// whole archives (qflow_link_layers in cmake/QflowCompileOptions.cmake). The registry is
// open: the CUDA backend adds kernels (registry.impl), quant and fx declare ops of their own.
// Every user call, typed (`qflow::add(a, b)`) or by name (`call_op("add", {a, b})`),
// takes the same road: Dispatcher::call → dispatch layers → kernel.
#include <array>
#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qflow/core/device.h"
#include "qflow/core/op_args.h"
#include "qflow/core/schema.h"

namespace qflow {

/// The shape and dtype of one tensor output, computed without running the kernel.
struct TensorMeta {
  TensorMeta() = default;
  TensorMeta(std::vector<int64_t> sizes_, DType dtype_ = DType::Float32, Device device_ = Device::cpu())
      : sizes(std::move(sizes_)), dtype(dtype_), device(device_) {}
  std::vector<int64_t> sizes;
  DType dtype = DType::Float32;
  Device device;  // set where the meta describes a real tensor (autograd's inputs)
};

/// Computes output metas from the arguments (tensors in `args` may hold no data: tracers
/// call shape rules on proxies). One entry per tensor output. Reads arguments by name.
using ShapeFn = std::vector<TensorMeta> (*)(const OpArgs& args);
/// Runs the op on real tensors; reads arguments by name, returns results in schema order.
using KernelFn = Stack (*)(OpArgs& args);

/// Note [Kernels per device]
/// An op has one kernel per device type: `kernel` is the CPU's, and a backend layer adds its
/// own with `registry.impl("add", DeviceType::CUDA, add_cuda)` from its static initialiser
/// (before or after the op's def: registration order across files is unspecified). When the
/// op runs, OpDef::run picks the kernel of its tensors' device; tensors on two devices are
/// refused, naming the op, the argument and both devices (copy_ alone, `mixes_devices`,
/// copies between devices). On the CPU, a call with a tensor in a blocked oneDNN layout runs the
/// op's blocked kernel when it has one (`registry.impl_blocked`), the same way a device key
/// selects a kernel, instead of branching inside the plain kernel. An op whose CPU kernel only calls other ops is declared
/// `device_generic` and runs on every device through them. An op without a kernel for a
/// device says so, naming the op and the device, and quoting the reason when one was declared
/// (`registry.no_kernel`). tests/cuda/op_coverage_test.cpp lists every op's CUDA kernel or reason.
struct OpDef {
  OpSchema schema;
  ShapeFn shape = nullptr;
  KernelFn kernel = nullptr;  // the CPU kernel
  std::string name;  // schema.full_name(), cached
  /// The CPU kernel for calls with a tensor in one of oneDNN's blocked layouts (Note [Opaque
  /// layouts]); null: such tensors are made plain first and `kernel` runs.
  KernelFn blocked_kernel = nullptr;
  /// Kernels of the device types other than the CPU (indexed by DeviceType; null: none).
  std::array<KernelFn, kNumDeviceTypes> device_kernels{};
  /// Why there is no kernel for a device type (empty: none declared).
  std::array<std::string, kNumDeviceTypes> no_kernel_reasons;
  /// The CPU kernel only calls other ops, so it runs on every device.
  bool device_generic = false;
  /// The op takes tensors on different devices (copy_); its kernel runs on the first's device.
  bool mixes_devices = false;

  /// Runs the kernel of the arguments' device on `args` (in schema order).
  Stack run(Stack& args) const {
    OpArgs view(schema, args);
    return kernel_for(args)(view);
  }
  /// The kernel for the device of the tensors in `args`. Throws qflow::Error when they are on
  /// two devices or the device has no kernel for this op.
  KernelFn kernel_for(const Stack& args) const;
  /// True when a call with tensors on a device of `type` has a kernel to run.
  bool runs_on(DeviceType type) const {
    return type == DeviceType::CPU || device_generic || device_kernels[static_cast<int>(type)] != nullptr;
  }
  /// Runs the shape rule on `args` (in schema order).
  std::vector<TensorMeta> infer_shapes(const Stack& args) const { return shape(OpArgs::reading(schema, args)); }
};

class OpRegistry {
 public:
  static OpRegistry& instance();

  /// Registers an op; a second registration of the same full name is an error.
  const OpDef& def(std::string_view schema, ShapeFn shape, KernelFn kernel);
  /// Registers `full_name`'s kernel for CPU calls with a tensor in a blocked oneDNN layout
  /// (Note [Opaque layouts], Note [Kernels per device]).
  void impl_blocked(std::string_view full_name, KernelFn kernel);
  /// Registers `full_name`'s kernel for `type` (Note [Kernels per device]); the op may be
  /// defined later. A second kernel for the same (op, device type) is an error.
  void impl(std::string_view full_name, DeviceType type, KernelFn kernel);
  /// Declares ops whose CPU kernels only call other ops: they run on every device.
  void device_generic(std::initializer_list<std::string_view> full_names);
  /// Declares why `full_names` have no kernel for `type` (quoted by the error a call gets).
  void no_kernel(std::initializer_list<std::string_view> full_names, DeviceType type, std::string_view reason);
  /// Declares that `full_name` takes tensors on different devices (Note [Kernels per device]).
  void mixes_devices(std::string_view full_name);
  /// Names given to impl/device_generic/no_kernel that no op was ever defined with
  /// (a misspelling; the coverage test checks the list is empty).
  std::vector<std::string> unattached_declarations() const;
  /// Null when unknown.
  const OpDef* find(std::string_view full_name) const;
  /// Throws qflow::Error "unknown op 'x'" (with close matches) when unknown.
  const OpDef& get(std::string_view full_name) const;
  std::vector<const OpDef*> all() const;

 private:
  // Applies `edit` to the op now, or when it is defined.
  void edit_op(std::string_view full_name, std::function<void(OpDef&)> edit);

  std::unordered_map<std::string, std::unique_ptr<OpDef>> ops_;
  std::unordered_map<std::string, std::vector<std::function<void(OpDef&)>>> pending_;
};

/// A lazily resolved op, for the typed wrappers: `static OpHandle op("add");`.
class OpHandle {
 public:
  explicit OpHandle(const char* full_name) : name_(full_name) {}
  const OpDef& get() const {
    const OpDef* d = def_.load(std::memory_order_acquire);
    if (!d) [[unlikely]] {
      d = &OpRegistry::instance().get(name_);
      def_.store(d, std::memory_order_release);
    }
    return *d;
  }
  /// The op, once `args` are known to name its schema's arguments in order. The names are
  /// compared at the first call only (Note [Arguments by name]); a mismatch throws
  /// qflow::Error naming the op, the wrapper's names and the schema's.
  const OpDef& checked(NamedArgs args) const {
    if (const OpDef* d = checked_.load(std::memory_order_acquire)) [[likely]] return *d;
    return check_names(args);
  }

 private:
  const OpDef& check_names(NamedArgs args) const;

  const char* name_;
  mutable std::atomic<const OpDef*> def_{nullptr};
  mutable std::atomic<const OpDef*> checked_{nullptr};
};

namespace detail {
struct OpRegistrar {
  explicit OpRegistrar(void (*fn)(OpRegistry&)) { fn(OpRegistry::instance()); }
};
}  // namespace detail

}  // namespace qflow

#define QFLOW_CONCAT_INNER(a, b) a##b
#define QFLOW_CONCAT(a, b) QFLOW_CONCAT_INNER(a, b)
/// Defines a function run at start-up that registers a family of ops into `registry`.
#define QFLOW_REGISTER_OPS(family)                                                          \
  static void QFLOW_CONCAT(qflow_register_ops_, family)(::qflow::OpRegistry & registry);    \
  static ::qflow::detail::OpRegistrar QFLOW_CONCAT(qflow_op_registrar_, family){            \
      &QFLOW_CONCAT(qflow_register_ops_, family)};                                          \
  static void QFLOW_CONCAT(qflow_register_ops_, family)([[maybe_unused]] ::qflow::OpRegistry & registry)
