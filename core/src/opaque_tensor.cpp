#include "qflow/core/opaque_tensor.h"

#include "qflow/core/ops.h"

namespace qflow {

bool is_unpadded_opaque(const Tensor& t) {
  const OpaqueLayout* l = t.defined() ? t.impl()->opaque_layout() : nullptr;
  return l != nullptr && l->nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

Tensor empty_opaque_like(const Tensor& like) {
  const auto& layout = like.impl()->opaque_layout_ptr();
  QFLOW_ASSERT(layout, "empty_opaque_like: tensor of shape {} has no opaque layout", like.sizes());
  auto impl = std::make_shared<TensorImpl>(Storage::allocate(layout->nbytes()), like.sizes(),
                                           contiguous_strides(like.sizes()), 0, like.dtype());
  impl->set_opaque_layout(layout);
  return Tensor(std::move(impl));
}

Tensor empty_opaque_like(const Tensor& like, DType dtype) {
  const OpaqueLayout* layout = like.impl()->opaque_layout();
  QFLOW_ASSERT(layout, "empty_opaque_like: tensor of shape {} has no opaque layout", like.sizes());
  auto converted = layout->with_element_type(dtype);
  if (!converted) return Tensor();
  auto impl = std::make_shared<TensorImpl>(Storage::allocate(converted->nbytes()), like.sizes(),
                                           contiguous_strides(like.sizes()), 0, dtype);
  impl->set_opaque_layout(std::move(converted));
  return Tensor(std::move(impl));
}

Tensor to_opaque_layout_of(const Tensor& t, const Tensor& like) {
  const OpaqueLayout* target = like.impl()->opaque_layout();
  QFLOW_ASSERT(target, "to_opaque_layout_of: target of shape {} has no opaque layout", like.sizes());
  if (const OpaqueLayout* l = t.impl()->opaque_layout(); l && l->same_as(*target)) return t;
  t.impl()->make_plain();
  const Tensor plain = t.is_contiguous() ? t : t.contiguous();
  Tensor out = empty_opaque_like(like);
  target->from_plain(plain.raw_data(), opaque_storage_ptr(out));
  count_layout_conversion();
  return out;
}

void* opaque_storage_ptr(const Tensor& t) { return t.impl()->data(); }

Tensor opaque_storage_as_flat(const Tensor& t) {
  QFLOW_ASSERT(is_unpadded_opaque(t), "opaque_storage_as_flat: tensor of shape {} is not an unpadded opaque tensor",
               t.sizes());
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), std::vector<int64_t>{t.numel()},
                                             std::vector<int64_t>{1}, 0, t.dtype()));
}

}  // namespace qflow
