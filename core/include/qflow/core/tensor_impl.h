#pragma once
// TensorImpl: what a Tensor handle points to. Core stores the autograd and extension slots
// but never looks inside them (see ARCHITECTURE.md §2).
#include <cstdint>
#include <memory>
#include <vector>

#include "qflow/core/dispatch_key.h"
#include "qflow/core/dtype.h"
#include "qflow/core/opaque_layout.h"
#include "qflow/core/storage.h"
#include "qflow/core/sym_int.h"

namespace qflow {

/// Opaque per-tensor state owned by the autograd layer.
class AutogradMetaBase {
 public:
  virtual ~AutogradMetaBase() = default;
};

/// Opaque per-tensor state owned by another dispatch layer (fx keeps its proxy node here).
class TensorExtension {
 public:
  virtual ~TensorExtension() = default;
  /// Size of `dim` as the program should see it; tracers return a symbolic SymInt here.
  /// See Note [Symbolic sizes].
  virtual SymInt sym_size(int64_t /*dim*/, int64_t concrete) const { return SymInt(concrete); }
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, std::vector<int64_t> sizes,
             std::vector<int64_t> strides, int64_t offset, DType dtype);

  const std::shared_ptr<Storage>& storage() const { return storage_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  /// The storage's device (the CPU for a tensor without storage, e.g. a traced proxy).
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }
  /// True for tensors created by a view op (they share storage with a base tensor).
  bool is_view() const { return is_view_; }
  void set_is_view(bool v) { is_view_ = v; }

  /// Address of element 0 (storage base + offset); null for tensors without storage.
  void* data() const;

  /// The layout of an opaque tensor (null for ordinary strided ones). See Note [Opaque layouts].
  const OpaqueLayout* opaque_layout() const { return opaque_layout_.get(); }
  const std::shared_ptr<const OpaqueLayout>& opaque_layout_ptr() const { return opaque_layout_; }
  /// Declares the storage to hold `layout`'s bytes (at least layout->nbytes() from offset 0);
  /// adds kOpaqueLayoutKey. Sizes stay the logical ones.
  void set_opaque_layout(std::shared_ptr<const OpaqueLayout> layout);
  /// Converts an opaque tensor to plain row-major in place: new storage (keeping the version
  /// counter's value), contiguous strides, no layout. No-op for ordinary tensors.
  void make_plain();

  /// A new impl over the same storage, sizes, strides, offset, dtype and opaque layout, without
  /// autograd meta, keys other than the layout's, or extension (a detached alias).
  std::shared_ptr<TensorImpl> alias() const;

  /// Changes shape/strides in place (used by resize-like internals and tracers).
  void set_sizes_and_strides(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset);

  DispatchKeySet keys() const { return keys_; }
  void add_key(DispatchKey k) { keys_ = keys_.add(k); }
  void remove_key(DispatchKey k) { keys_ = keys_.remove(k); }

  AutogradMetaBase* autograd_meta() const { return autograd_meta_.get(); }
  const std::shared_ptr<AutogradMetaBase>& autograd_meta_ptr() const { return autograd_meta_; }
  void set_autograd_meta(std::shared_ptr<AutogradMetaBase> m) { autograd_meta_ = std::move(m); }

  TensorExtension* extension() const { return extension_.get(); }
  const std::shared_ptr<TensorExtension>& extension_ptr() const { return extension_; }
  void set_extension(std::shared_ptr<TensorExtension> e) { extension_ = std::move(e); }

 private:
  void refresh();

  std::shared_ptr<Storage> storage_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  DType dtype_;
  bool contiguous_ = true;
  bool is_view_ = false;
  DispatchKeySet keys_;
  std::shared_ptr<AutogradMetaBase> autograd_meta_;
  std::shared_ptr<TensorExtension> extension_;
  std::shared_ptr<const OpaqueLayout> opaque_layout_;
};

/// Row-major strides for `sizes`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);
/// Product of sizes (1 for a 0-dim tensor); checks for negative sizes and overflow.
int64_t checked_numel(const std::vector<int64_t>& sizes, const char* op);

}  // namespace qflow
