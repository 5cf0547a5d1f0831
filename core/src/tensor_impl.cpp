#include "qflow/core/tensor_impl.h"

#include <limits>

namespace qflow {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

int64_t checked_numel(const std::vector<int64_t>& sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    QFLOW_CHECK(s >= 0, "{}: negative dimension {} in shape {}", op, s, sizes);
    QFLOW_CHECK(s == 0 || n <= std::numeric_limits<int64_t>::max() / s, "{}: shape {} has too many elements", op, sizes);
    n *= s;
  }
  return n;
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, std::vector<int64_t> sizes,
                       std::vector<int64_t> strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset), dtype_(dtype) {
  QFLOW_ASSERT(sizes_.size() == strides_.size(), "sizes {} and strides {} differ in rank", sizes_, strides_);
  refresh();
}

void TensorImpl::set_sizes_and_strides(std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset) {
  QFLOW_ASSERT(sizes.size() == strides.size(), "sizes {} and strides {} differ in rank", sizes, strides);
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::set_opaque_layout(std::shared_ptr<const OpaqueLayout> layout) {
  QFLOW_ASSERT(layout && storage_ && offset_ == 0 && storage_->nbytes() >= layout->nbytes(),
               "an opaque layout needs its own storage of {} bytes", layout ? layout->nbytes() : 0);
  opaque_layout_ = std::move(layout);
  strides_ = contiguous_strides(sizes_);
  add_key(kOpaqueLayoutKey);
  refresh();
}

std::shared_ptr<TensorImpl> TensorImpl::alias() const {
  auto a = std::make_shared<TensorImpl>(storage_, sizes_, strides_, offset_, dtype_);
  if (opaque_layout_) a->set_opaque_layout(opaque_layout_);
  return a;
}

void TensorImpl::make_plain() {
  if (!opaque_layout_) return;
  auto plain = Storage::allocate(static_cast<size_t>(numel_) * element_size(dtype_));
  opaque_layout_->to_plain(storage_->data(), plain->data());
  plain->set_version(storage_->version());  // same values: saved copies must not see a write
  storage_ = std::move(plain);
  opaque_layout_.reset();
  remove_key(kOpaqueLayoutKey);
  count_layout_conversion();
  refresh();
}

void TensorImpl::refresh() {
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;
  contiguous_ = !opaque_layout_;
  if (!contiguous_) return;
  // A tensor without elements has no layout to break (PyTorch: empty tensors are contiguous);
  // the stride walk below would call [2, 0] with strides [1, 1] non-contiguous.
  if (numel_ == 0) return;
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      contiguous_ = false;
      break;
    }
    expected *= sizes_[i];
  }
}

void* TensorImpl::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
}

}  // namespace qflow
