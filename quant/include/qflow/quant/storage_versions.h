#pragma once
// StorageVersions: which data a cached value was computed from, so the cache knows when to
// recompute it.
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::quant::detail {

/// The storage and write version of each source tensor (undefined tensors count as "none").
/// Two equal keys mean no source has been written in between: in-place ops and load_state_dict
/// bump the version of the storage they write. The storages are held, not just their
/// addresses, so a freed storage's address reused by a new one cannot look unchanged.
class StorageVersions {
 public:
  StorageVersions() = default;
  explicit StorageVersions(std::initializer_list<const Tensor*> sources) {
    for (const Tensor* t : sources) {
      std::shared_ptr<Storage> s = t->defined() ? t->impl()->storage() : nullptr;
      const uint64_t version = s ? s->version() : 0;
      key_.emplace_back(std::move(s), version);
    }
  }
  bool operator==(const StorageVersions& other) const = default;

 private:
  std::vector<std::pair<std::shared_ptr<Storage>, uint64_t>> key_;
};

}  // namespace qflow::quant::detail
