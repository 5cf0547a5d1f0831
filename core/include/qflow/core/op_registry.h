#pragma once
// The op registry: one entry per public op (name, schema, shape rule, CPU kernel).
//
// Note [Op registration]
// Each kernel family registers its ops from a static initialiser in its own file:
//
//   QFLOW_REGISTER_OPS(elementwise_binary) {
//     registry.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
//                  add_shape, add_kernel);
//   }
//
// where `Stack add_kernel(OpArgs& a)` reads `a.tensor("self")`, `a.scalar("alpha")` by the
// schema's names (Note [Arguments by name]), and the typed wrapper names them too:
//
//   Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
//     QFLOW_OP_HANDLE("add");
//     return call_tensor(op, {{"self", a}, {"other", b}, {"alpha", alpha}});
//   }
//
// Static libraries would drop such object files, so every target links qflow's layers as
// whole archives (qflow_link_layers in cmake/QflowCompileOptions.cmake). The registry is
// open: autograd registers derivatives, quant registers fake_quantize the same way.
// Every user call, typed (`qflow::add(a, b)`) or by name (`call_op("add", {a, b})`),
// takes the same road: Dispatcher::call → dispatch layers → kernel.
#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qflow/core/op_args.h"
#include "qflow/core/schema.h"

namespace qflow {

/// The shape and dtype of one tensor output, computed without running the kernel.
struct TensorMeta {
  std::vector<int64_t> sizes;
  DType dtype = DType::Float32;
};

/// Computes output metas from the arguments (tensors in `args` may hold no data: tracers
/// call shape rules on proxies). One entry per tensor output. Reads arguments by name.
using ShapeFn = std::vector<TensorMeta> (*)(const OpArgs& args);
/// Runs the op on real tensors; reads arguments by name, returns results in schema order.
using KernelFn = Stack (*)(OpArgs& args);

struct OpDef {
  OpSchema schema;
  ShapeFn shape = nullptr;
  KernelFn kernel = nullptr;
  std::string name;  // schema.full_name(), cached
  /// The kernel takes tensors in opaque layouts as they are (see Note [Opaque layouts]).
  bool accepts_opaque_layout = false;

  /// Runs the kernel on `args` (in schema order).
  Stack run(Stack& args) const {
    OpArgs view(schema, args);
    return kernel(view);
  }
  /// Runs the shape rule on `args` (in schema order).
  std::vector<TensorMeta> infer_shapes(const Stack& args) const { return shape(OpArgs::reading(schema, args)); }
};

class OpRegistry {
 public:
  static OpRegistry& instance();

  /// Registers an op; a second registration of the same full name is an error.
  const OpDef& def(std::string_view schema, ShapeFn shape, KernelFn kernel);
  /// Declares that `full_name`'s kernel takes opaque-layout tensors (Note [Opaque layouts]).
  void allow_opaque_layout(std::string_view full_name);
  /// Null when unknown.
  const OpDef* find(std::string_view full_name) const;
  /// Throws qflow::Error "unknown op 'x'" (with close matches) when unknown.
  const OpDef& get(std::string_view full_name) const;
  std::vector<const OpDef*> all() const;

 private:
  std::unordered_map<std::string, std::unique_ptr<OpDef>> ops_;
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
