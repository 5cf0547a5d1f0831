#pragma once
// nn::Cloneable<Derived>: the base that gives a module a deep clone().
//
// Note [Module cloning]
// A clone must hold new tensors and new children, and the clone's *members* (the
// `std::shared_ptr<Conv2d> conv1` and `Tensor weight` fields its forward uses) must point at
// them. C++ cannot enumerate a class's members, and copying a module copies those handles, so
// the copy would still alias the original's children. Like libtorch's Cloneable::reset(), we
// therefore re-run the code that registers the entries and assigns the members, with a twist
// that makes the result exact rather than freshly initialized:
//
//   While Cloneable<D>::clone() builds the copy, a thread-local CloneScope makes every
//   register_parameter / register_buffer / register_module(name, ...) call *on the copy*
//   return a deep copy of the source's entry of that name (the freshly built argument is
//   discarded). So `conv1 = register_module("conv1", nn::Conv2d(...))` binds the clone's
//   member to a clone of the source's current conv1, with its current values and
//   requires_grad flags, whatever initializer ran.
//
// The copy is rebuilt in one of two ways:
//   1. D has a public `void reset()` (layers that build their entries from stored options):
//      the copy is copy-constructed (options and plain fields are copied), its registries are
//      emptied, and reset() re-registers everything.
//   2. Otherwise D must be default-constructible (models written with in-class initializers,
//      as README.md's "Writing a model"): the copy is default-constructed. Plain (non-registered) fields then
//      take their constructor values; a module with mutable configuration needs a reset().
//
// Afterwards the clone must have registered exactly the source's names, in order; anything
// else (an entry registered after construction, a default constructor that builds a
// different structure) is an error, never a clone whose members alias the source. The
// default random generator is restored, so cloning does not shift anyone's random stream.
// The clone starts without gradients and in the source's train/eval mode. A subclass of D
// must derive from Cloneable itself (clone() refuses to slice). Modules without typed
// members (Sequential, ModuleList, fx's GraphModule) override clone() with
// Module::clone_entries_into instead.
#include <cstdint>
#include <memory>
#include <typeinfo>
#include <vector>

#include "qflow/nn/module.h"

namespace qflow::nn {

namespace detail {

/// Keeps sharing intact while cloning: a module or tensor reached twice is copied once
/// (PyTorch's deepcopy memo). The outermost scope on a thread owns the memo.
class CloneMemoScope {
 public:
  CloneMemoScope();
  ~CloneMemoScope();
  CloneMemoScope(const CloneMemoScope&) = delete;
  CloneMemoScope& operator=(const CloneMemoScope&) = delete;

 private:
  bool owner_;
};

/// source->clone(), or the copy already made during the current clone.
ModulePtr clone_child(const ModulePtr& source);
/// A graph-free deep copy keeping requires_grad (memoized during a clone).
Tensor clone_tensor(const Tensor& source);

/// One clone in progress on this thread. Scopes nest: cloning a child happens inside the
/// parent's scope. See Note [Module cloning].
class CloneScope {
 public:
  explicit CloneScope(const Module& source);
  ~CloneScope();
  CloneScope(const CloneScope&) = delete;
  CloneScope& operator=(const CloneScope&) = delete;

  /// Checks that `copy` re-registered exactly the source's entries and copies the mode.
  void finish(Module& copy) const;

 private:
  CloneMemoScope memo_;
  const Module& source_;
  uint64_t rng_seed_;
  uint64_t rng_offset_;
};

/// The source whose clone `target` is, if `target` is being rebuilt on this thread.
const Module* clone_source_of(const Module* target);

[[noreturn]] void fail_clone(const Module& m, const char* why);

}  // namespace detail

template <class Derived>
class Cloneable : public Module {
 public:
  ModulePtr clone() const override {
    if (typeid(*this) != typeid(Derived)) {
      detail::fail_clone(*this, "it derives from Cloneable of another class; derive from Cloneable<itself>");
    }
    detail::CloneScope scope(*this);
    std::shared_ptr<Derived> copy;
    if constexpr (requires(Derived& d) { d.reset(); }) {
      copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
      copy->reset();
    } else if constexpr (std::is_default_constructible_v<Derived>) {
      copy = std::make_shared<Derived>();
    } else {
      detail::fail_clone(*this, "it has neither a public reset() nor a default constructor");
    }
    scope.finish(*copy);
    return copy;
  }

 protected:
  Cloneable() { claim_clone_target(nullptr); }
  Cloneable(const Cloneable& other) : Module(other) { claim_clone_target(&other); }
  Cloneable(Cloneable&& other) noexcept : Module(std::move(other)) {}
};

}  // namespace qflow::nn
