#include "tensor_alloc.h"

namespace qflow::data::detail {

Tensor wrap_bytes(ByteBuffer buffer, const std::vector<int64_t>& sizes) {
  const int64_t n = checked_numel(sizes, "wrap_bytes");
  QFLOW_ASSERT(static_cast<size_t>(n) == buffer.size(), "buffer of {} bytes for shape {}", buffer.size(), sizes);
  auto owner = std::make_shared<ByteBuffer>(std::move(buffer));
  void* data = owner->data();
  auto storage = Storage::wrap(data, owner->size(), [owner](void*) mutable { owner.reset(); });
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, DType::UInt8));
}

Tensor view_into(const Tensor& base, const std::vector<int64_t>& sizes, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(base.impl()->storage(), sizes, contiguous_strides(sizes),
                                           base.storage_offset() + offset, base.dtype());
  impl->set_is_view(true);
  return Tensor(std::move(impl));
}

Tensor new_tensor(const std::vector<int64_t>& sizes, DType dtype) {
  const int64_t n = checked_numel(sizes, "new_tensor");
  auto storage = Storage::allocate(static_cast<size_t>(n) * element_size(dtype));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

}  // namespace qflow::data::detail
