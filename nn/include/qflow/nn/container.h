#pragma once
// Containers of modules indexed by position: Sequential (runs its children in order) and
// ModuleList (holds them for a forward written by hand). Children are named "0", "1", ...
// so paths read "features.3.weight", exactly as in PyTorch.
#include <cstdint>
#include <iterator>
#include <memory>
#include <type_traits>

#include "qflow/nn/module.h"

namespace qflow::nn {

/// The shared part of Sequential and ModuleList: append, index, iterate.
class ModuleSequence : public Module {
 public:
  /// Appends `module` under the name of its position.
  template <class M>
    requires std::derived_from<M, Module>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    return register_module(std::to_string(size()), std::move(module));
  }
  template <class M>
    requires std::derived_from<std::remove_cvref_t<M>, Module>
  std::shared_ptr<std::remove_cvref_t<M>> push_back(M&& module) {
    return register_module(std::to_string(size()), std::forward<M>(module));
  }

  size_t size() const { return registered_children().size(); }
  bool empty() const { return size() == 0; }
  /// The module at `index`; negative indices count from the end, as in Python.
  const ModulePtr& operator[](int64_t index) const;
  /// The module at `index`, checked to be an M.
  template <class M>
    requires std::derived_from<M, Module>
  std::shared_ptr<M> at(int64_t index) const {
    auto cast = std::dynamic_pointer_cast<M>((*this)[index]);
    QFLOW_CHECK(cast != nullptr, "{}::at({}): the module is a {}, not the requested type", type_name(), index,
                (*this)[index]->type_name());
    return cast;
  }

  /// Iterates the modules (not the names) in order.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = ModulePtr;
    using difference_type = std::ptrdiff_t;
    using pointer = const ModulePtr*;
    using reference = const ModulePtr&;
    const_iterator() = default;
    explicit const_iterator(std::vector<NamedModule>::const_iterator it) : it_(it) {}
    reference operator*() const { return it_->second; }
    pointer operator->() const { return &it_->second; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    const_iterator operator++(int) { return const_iterator(it_++); }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }

   private:
    std::vector<NamedModule>::const_iterator it_;
  };
  const_iterator begin() const { return const_iterator(registered_children().begin()); }
  const_iterator end() const { return const_iterator(registered_children().end()); }

 protected:
  ModuleSequence() = default;
  /// Registers `modules` in order; used by the variadic constructors.
  template <class... Ms> void push_all(Ms&&... modules) { (push_back(std::forward<Ms>(modules)), ...); }
};

/// Runs its children in order, each on the previous one's outputs. Empty = identity.
class Sequential : public ModuleSequence {
 public:
  Sequential() = default;
  /// Sequential(nn::Conv2d({...}), nn::ReLU(), std::make_shared<Block>(...), ...)
  template <class... Ms>
    requires(sizeof...(Ms) > 0 && (!std::is_same_v<std::remove_cvref_t<Ms>, Sequential> && ...))
  explicit Sequential(Ms&&... modules) {
    push_all(std::forward<Ms>(modules)...);
  }

  Tensor forward(const Tensor& input) override;
  TensorList forward_list(const TensorList& inputs) override;
  ModulePtr clone() const override;
};

/// Holds modules by position; has no forward of its own.
class ModuleList : public ModuleSequence {
 public:
  ModuleList() = default;
  template <class... Ms>
    requires(sizeof...(Ms) > 0 && (!std::is_same_v<std::remove_cvref_t<Ms>, ModuleList> && ...))
  explicit ModuleList(Ms&&... modules) {
    push_all(std::forward<Ms>(modules)...);
  }

  ModulePtr clone() const override;
};

}  // namespace qflow::nn
