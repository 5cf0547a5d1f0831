#pragma once
// StateDict: the flat, insertion-ordered map of dotted names to tensors that modules export
// (`state_dict()`), import (`load_state_dict`) and checkpoints store (see serialize.h).
#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::nn {

/// Ordered (key, tensor) pairs with O(1) lookup. Keeps insertion order like PyTorch's
/// OrderedDict, so a module's state_dict lists its entries in registration order.
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<Item>::const_iterator;

  StateDict() = default;
  StateDict(std::initializer_list<Item> items);

  /// Appends `key`; a key that is already present is an error.
  void insert(std::string key, Tensor value);
  /// Replaces the value of an existing key in place, or appends a new one.
  void insert_or_assign(std::string key, Tensor value);
  /// Removes `key`; returns false when it was absent.
  bool erase(const std::string& key);

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  /// The tensor stored under `key`; throws a qflow::Error naming the key when absent.
  const Tensor& at(const std::string& key) const;
  /// Null when `key` is absent.
  const Tensor* find(const std::string& key) const;

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  const std::vector<Item>& items() const { return items_; }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace qflow::nn
