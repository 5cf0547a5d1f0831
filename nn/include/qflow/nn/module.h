#pragma once
// nn::Module: the base of every layer and model. A module owns ordered registries of
// parameters, buffers and child modules; everything else (dotted names, state_dict, train/eval,
// dtype conversion, printing) walks those registries.
//
//   struct Net : nn::Cloneable<Net> {
//     std::shared_ptr<nn::Conv2d> conv1 = register_module("conv1", nn::Conv2d({...}));
//     Tensor scale = register_parameter("scale", ones({1}));
//     Tensor forward(const Tensor& x) override { return (*conv1)(x) * scale; }
//   };
//
// Calling a module always goes through the non-virtual Module::call (operator() wraps it),
// which runs the virtual forward; see Note [Module call hook]. Derive from nn::Cloneable<X>
// (cloneable.h) to get a deep clone(); see Note [Module cloning].
#include <concepts>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "qflow/core/tensor.h"
#include "qflow/nn/module_call_hook.h"
#include "qflow/nn/state_dict.h"

namespace qflow::nn {

class Module;
namespace detail {
class CloneAccess;
}
using ModulePtr = std::shared_ptr<Module>;
using NamedTensor = std::pair<std::string, Tensor>;
using NamedModule = std::pair<std::string, ModulePtr>;

/// What a non-strict load_state_dict skipped (PyTorch's _IncompatibleKeys).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, absent from the dict
  std::vector<std::string> unexpected_keys;  // in the dict, absent from the module
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module& operator=(const Module&) = delete;
  Module& operator=(Module&&) = delete;

  // ---- calling ---------------------------------------------------------------------------
  /// The one entry for running a module: runs forward_list, or hands the call to the thread's
  /// ModuleCallHook when one is installed. Non-virtual on purpose.
  TensorList call(const TensorList& inputs);
  /// call() for modules with one output.
  Tensor operator()(const Tensor& input);
  template <class... Rest>
    requires(std::convertible_to<const Rest&, const Tensor&> && ...)
  Tensor operator()(const Tensor& a, const Tensor& b, const Rest&... rest) {
    return single_output(call(TensorList{a, b, Tensor(rest)...}));
  }

  /// Single-input, single-output computation; most modules override this.
  virtual Tensor forward(const Tensor& input);
  /// Many inputs and/or outputs. The default passes a single input to forward(Tensor).
  virtual TensorList forward_list(const TensorList& inputs);

  // ---- registration (names: non-empty, no '.', unique across all three kinds) ----------
  /// Registers a parameter (made a leaf requiring grad unless requires_grad is false) and
  /// returns the registered handle. An undefined tensor registers an absent parameter
  /// (PyTorch's None), which iteration and state_dict skip.
  Tensor register_parameter(std::string name, Tensor value, bool requires_grad = true);
  /// Registers a buffer: state that is not trained (running statistics, counters).
  /// Non-persistent buffers are left out of state_dict.
  Tensor register_buffer(std::string name, Tensor value, bool persistent = true);
  template <class M>
    requires std::derived_from<M, Module>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    return checked_cast<M>(register_child(std::move(name), std::move(module)), "register_module");
  }
  /// Takes a module by value: register_module("conv1", nn::Conv2d({...})).
  template <class M>
    requires std::derived_from<std::remove_cvref_t<M>, Module>
  std::shared_ptr<std::remove_cvref_t<M>> register_module(std::string name, M&& module) {
    using T = std::remove_cvref_t<M>;
    return register_module<T>(std::move(name), std::make_shared<T>(std::forward<M>(module)));
  }
  /// Removes the child registered as `name` (every registration under that name) and returns
  /// it; null when there is none. Graph rewriting (fx::GraphModule::delete_submodule) needs it.
  ModulePtr unregister_module(std::string_view name);
  /// Puts `module` in place of the child registered as `name`, keeping its position so
  /// named_modules()/state_dict() order is unchanged; returns the replaced child. Throws when
  /// there is no such child.
  ModulePtr replace_module(std::string_view name, ModulePtr module);

  // ---- traversal (ordered; dotted paths like "layer1.0.conv1.weight") --------------------
  /// Parameters of this module, then of its descendants (pre-order); shared tensors once.
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<NamedTensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<NamedTensor> named_buffers(bool recurse = true) const;
  std::vector<ModulePtr> children() const;
  std::vector<NamedModule> named_children() const;
  /// This module ("" in named_modules) and every descendant, pre-order, each module once.
  std::vector<ModulePtr> modules();
  std::vector<NamedModule> named_modules();

  /// The descendant at a dotted path ("" is this module). The error names the missing part.
  ModulePtr get_submodule(std::string_view path) const;
  template <class M>
    requires std::derived_from<M, Module>
  std::shared_ptr<M> get_submodule(std::string_view path) const {
    return checked_cast<M>(get_submodule(path), "get_submodule");
  }
  Tensor get_parameter(std::string_view path) const;
  Tensor get_buffer(std::string_view path) const;

  // ---- modes and bulk updates ------------------------------------------------------------
  /// Sets training mode on this module and all descendants.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Calls fn on every descendant (children first, like PyTorch) and then on this module.
  void apply(const std::function<void(Module&)>& fn);
  /// Drops every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  /// Converts floating point parameters and buffers (and their grads) to `dtype` in place:
  /// handles held by members stay valid. See Note [Module::to converts in place].
  Module& to(DType dtype);
  /// Moves every parameter and buffer (and their grads) to `device` in place, the same way;
  /// an optimizer built on the parameters follows with Optimizer::to (Note [Devices]).
  Module& to(Device device);
  /// The device of the first parameter or buffer (the CPU for a module without any).
  Device device() const;

  /// Deep copy: new parameters, buffers and children, independent of this module's data and
  /// autograd graph. Derive from nn::Cloneable<X> to implement it; see Note [Module cloning].
  virtual ModulePtr clone() const;
  /// A module computing relu(forward(x)) in one go, sharing this module's parameters, buffers
  /// and children, with its state_dict keys (fx::fuse_activations installs it in place of this
  /// module and the ReLU after it); null when there is no such form.
  virtual ModulePtr fused_with_relu() const { return nullptr; }

  // ---- state -----------------------------------------------------------------------------
  /// Parameters and persistent buffers by dotted name (own entries first, then children),
  /// detached but sharing storage with the module.
  StateDict state_dict() const;
  /// Copies `dict` into the module's tensors (no autograd). Shape mismatches are always an
  /// error; with `strict`, so are missing and unexpected keys. All problems are reported in
  /// one error, and nothing is copied unless the whole load succeeds.
  LoadStateDictResult load_state_dict(const StateDict& dict, bool strict = true);

  // ---- printing --------------------------------------------------------------------------
  /// The class name ("Conv2d"); derived from the C++ type unless overridden.
  virtual std::string type_name() const;
  /// The text inside the parentheses of this module's line in repr().
  virtual std::string extra_repr() const { return ""; }
  /// PyTorch-style tree: "Net(\n  (conv1): Conv2d(3, 16, ...)\n)".
  std::string repr() const;

 protected:
  /// Shallow copy: the registries share tensors and children with `other` (as the members of
  /// a copied subclass do). Used by Cloneable; see Note [Module cloning].
  Module(const Module& other);
  Module(Module&& other) noexcept;

  /// Copies every entry into `dst` (tensors deep-copied, children cloned) for modules whose
  /// entries are not mirrored by typed members: containers, graph modules.
  void clone_entries_into(Module& dst) const;
  /// This module's own children in registration order, including repeats (the same module
  /// registered under two names), which named_children() lists once.
  const std::vector<NamedModule>& registered_children() const { return children_; }
  /// Makes this module the target of the clone being built on this thread, if any; called by
  /// Cloneable's constructors. `copied_from` is the source when copy-constructing.
  void claim_clone_target(const Module* copied_from);

 private:
  struct Slot {
    std::string name;
    Tensor value;
    bool persistent = true;
  };
  ModulePtr register_child(std::string name, ModulePtr module);
  void check_new_name(const std::string& name, const char* what) const;
  const Slot* find_slot(const std::vector<Slot>& slots, std::string_view name) const;
  /// Pre-order (path, module) pairs for this module ("") and, with `recurse`, its
  /// descendants; with `dedup` a module reached twice is listed once.
  std::vector<std::pair<std::string, const Module*>> walk(bool recurse, bool dedup) const;
  template <class M> static std::shared_ptr<M> checked_cast(const ModulePtr& m, const char* op);
  [[noreturn]] static void fail_cast(const Module& m, const char* op, const std::type_info& wanted);
  static Tensor single_output(const TensorList& outputs);
  ModulePtr self_ptr();

  friend class detail::CloneAccess;  // the clone machinery reads and writes registries

  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<NamedModule> children_;
  bool training_ = true;
};

template <class M>
std::shared_ptr<M> Module::checked_cast(const ModulePtr& m, const char* op) {
  if constexpr (std::is_same_v<M, Module>) {
    return m;
  } else {
    auto cast = std::dynamic_pointer_cast<M>(m);
    if (!cast) fail_cast(*m, op, typeid(M));
    return cast;
  }
}

/// Prints repr().
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace qflow::nn
