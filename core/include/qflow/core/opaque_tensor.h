#pragma once
// Helpers for layout-aware kernels in any layer (quant's fake_quantize, core's element-wise
// ops): tensors in an opaque layout, read and written without converting them.
// See Note [Opaque layouts].
#include "qflow/core/tensor.h"

namespace qflow {

/// True when `t` is in an opaque layout whose storage holds exactly its numel() elements, so
/// element-wise maps and whole-tensor reductions may run over the raw storage (channel counts
/// that fill whole blocks: 64, 128, ... for nChw16c).
bool is_unpadded_opaque(const Tensor& t);
/// A new uninitialised tensor with `like`'s sizes, dtype and opaque layout.
Tensor empty_opaque_like(const Tensor& like);
/// A new uninitialised tensor with `like`'s sizes in `like`'s arrangement of elements holding
/// `dtype` (OpaqueLayout::with_element_type); an undefined tensor when the layout has none.
Tensor empty_opaque_like(const Tensor& like, DType dtype);
/// `t` (any layout) in the opaque layout of `like`: t itself when it already is, else a
/// converted copy (counted by layout_conversion_count()).
Tensor to_opaque_layout_of(const Tensor& t, const Tensor& like);
/// Address of `t`'s element storage without converting an opaque layout (data_ptr would).
void* opaque_storage_ptr(const Tensor& t);
/// The storage of an unpadded opaque tensor seen as a plain 1-D tensor (no copy): for
/// reductions whose result does not depend on the order of the elements.
Tensor opaque_storage_as_flat(const Tensor& t);

}  // namespace qflow
