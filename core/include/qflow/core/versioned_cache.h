#pragma once
// VersionedCache: a value computed from some tensors, kept until one of them is written.
//
// Note [Versioned caches]
// Several places keep a value derived from tensors that rarely change: a deployed layer's float
// weight (its grid integers dequantized) and its integer form (what the int8 kernel needs), and
// the int8 convolution's weights reordered into oneDNN's layout and its scaled bias. Each used to
// carry its own key; they now share this one. A key holds, per source tensor, its storage's
// address, a weak reference to it and its version (Note [Version counter]): in-place ops and
// load_state_dict bump the version of the storage they write, so an equal key means no source was
// written. The reference is weak, so a long-lived cache (the int8 plans) keeps no model alive;
// a storage that died never matches, so a new storage at a freed one's address cannot pass for
// it. The value is recomputed on the next get() after any write, and never read stale.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow {

/// Which data a cached value was computed from: each source's storage and write version
/// (undefined tensors count as "none").
class SourceVersions {
 public:
  explicit SourceVersions(std::initializer_list<const Tensor*> sources) {
    sources_.reserve(sources.size());
    for (const Tensor* t : sources) {
      const std::shared_ptr<Storage> s = t->defined() ? t->impl()->storage() : nullptr;
      sources_.push_back({s, s.get(), s ? s->version() : 0});
    }
  }
  /// The same storages, every one of them alive, at the same versions.
  bool operator==(const SourceVersions& other) const {
    if (sources_.size() != other.sources_.size()) return false;
    for (size_t i = 0; i < sources_.size(); ++i) {
      const Source &a = sources_[i], &b = other.sources_[i];
      if (a.address != b.address || a.version != b.version) return false;
      if (a.address != nullptr && (a.storage.expired() || b.storage.expired())) return false;
    }
    return true;
  }

 private:
  struct Source {
    std::weak_ptr<Storage> storage;
    const Storage* address = nullptr;
    uint64_t version = 0;
  };
  std::vector<Source> sources_;
};

/// A value of type T computed from source tensors, recomputed only after one of them is written
/// (Note [Versioned caches]). Not synchronised: callers that share one hold their own lock.
template <typename T>
class VersionedCache {
 public:
  /// The value `compute()` made from `sources`, computed again only when one of them was written
  /// since (or is another tensor's storage). An exception from `compute` leaves the cache empty
  /// of that key.
  template <typename Compute>
  const T& get(std::initializer_list<const Tensor*> sources, Compute&& compute) {
    SourceVersions key(sources);
    if (!key_ || !(*key_ == key)) {
      key_.reset();
      value_ = compute();
      key_.emplace(std::move(key));
    }
    return value_;
  }
  /// Forgets the value.
  void clear() {
    key_.reset();
    value_ = T{};
  }

 private:
  std::optional<SourceVersions> key_;
  T value_{};
};

}  // namespace qflow
