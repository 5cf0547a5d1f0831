#pragma once
// Helpers shared by the CPU kernels (internal to core: not installed, not public API).
#include <string_view>
#include <vector>

#include "qflow/core/op_registry.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels {

/// A new contiguous tensor with undefined contents.
Tensor new_tensor(const std::vector<int64_t>& sizes, DType dtype);
/// A new tensor in `like`'s opaque layout and sizes (uninitialised). See Note [Opaque layouts].
Tensor new_opaque_like(const Tensor& like);
/// Converts every opaque tensor argument to plain in place: what a layout-aware kernel does
/// before falling back to its plain path.
void make_plain_args(const Stack& args);
inline void make_plain_args(const OpArgs& args) { make_plain_args(args.stack()); }
/// A view of `base` sharing its storage (marked is_view).
Tensor make_view(const Tensor& base, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset);

/// Wraps a possibly negative dim into [0, ndim); error names the op and the valid range.
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op);
/// Wraps and de-duplicates a dim list; empty means "all dims".
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, std::string_view op);

/// NumPy broadcasting of two shapes; error names the op and both shapes.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::string_view op);
/// Strides that read `t` as if it had shape `sizes` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Tensor& t, const std::vector<int64_t>& sizes);

/// Dtype of `tensor op scalar` (PyTorch: a scalar never raises the tensor's category
/// except int tensor with float scalar → float32, bool tensor with int scalar → int64).
DType result_type(DType tensor, const Scalar& s);
/// `t` converted to `dtype` (no copy when it already has it).
Tensor cast(const Tensor& t, DType dtype);
/// dst (any layout) = src broadcast to dst's shape, converted to dst's dtype (copy.cpp).
void copy_tensor(const Tensor& dst, const Tensor& src);

/// Shape rule helper: one output.
inline std::vector<TensorMeta> one(std::vector<int64_t> sizes, DType dtype) { return {TensorMeta{std::move(sizes), dtype}}; }
/// Kernel helper: one tensor output.
inline Stack out(Tensor t) { return Stack{Value(std::move(t))}; }

}  // namespace qflow::kernels

/// Declares the lazily resolved handle `op` for a typed wrapper: QFLOW_OP_HANDLE("add");
#define QFLOW_OP_HANDLE(full_name) static const ::qflow::OpHandle op(full_name)
