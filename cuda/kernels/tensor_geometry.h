#pragma once
// Host helpers of the element-wise, copy, index and reduction registrations (*_ops.cpp):
// tensors turned into the plain launcher arguments of strided.cuh (geometry, element type,
// scalars, device pointers), output allocation in an operand's layout, and the shape rules of
// the CPU ops reused so CUDA kernels check and type their results exactly like the CPU's.
#include <initializer_list>
#include <string_view>
#include <vector>

#include "kernels/strided.cuh"
#include "qflow/core/dispatch.h"
#include "qflow/core/error.h"
#include "qflow/core/ops.h"
#include "src/cuda_ops.h"

namespace qflow::cuda {

inline ScalarType scalar_type(DType t) { return static_cast<ScalarType>(static_cast<int>(t)); }

inline ScalarArg scalar_arg(const Scalar& s) {
  ScalarArg a;
  a.f = s.to_double();
  a.i = s.is_integral() ? s.to_int() : 0;  // (converting inf or NaN to an integer is undefined)
  a.b = s.to_bool();
  a.integral = s.is_integral();
  return a;
}

/// Address of t's element 0 on the device (storage + offset).
inline void* device_ptr(const Tensor& t) { return t.impl()->data(); }
template <typename T>
T* device_ptr_as(const Tensor& t) {
  return static_cast<T*>(t.impl()->data());
}

/// Strides that read `t` as if it had shape `sizes` (0 on broadcast dims), NumPy-aligned.
inline std::vector<int64_t> broadcast_strides_to(const Tensor& t, const std::vector<int64_t>& sizes) {
  const auto& ts = t.sizes();
  const auto& st = t.strides();
  std::vector<int64_t> out(sizes.size(), 0);
  const size_t lead = sizes.size() - ts.size();
  for (size_t i = 0; i < ts.size(); ++i) out[lead + i] = ts[i] == 1 ? 0 : st[i];
  return out;
}

/// The geometry of `out` (operand 0, written through its own strides) and `inputs` broadcast
/// to out's shape (Note [Strided geometry]).
inline StridedGeometry geometry_of(const Tensor& out, std::initializer_list<const Tensor*> inputs, std::string_view op) {
  QFLOW_CHECK(inputs.size() + 1 <= static_cast<size_t>(kMaxOperands), "{}: too many operands for the CUDA loop", op);
  std::vector<std::vector<int64_t>> strides;
  strides.push_back(out.strides());
  for (const Tensor* t : inputs) strides.push_back(broadcast_strides_to(*t, out.sizes()));
  const int64_t* ptrs[kMaxOperands] = {};
  for (size_t k = 0; k < strides.size(); ++k) ptrs[k] = strides[k].data();
  StridedGeometry g;
  const bool ok = make_geometry(g, static_cast<int>(out.dim()), out.sizes().data(), static_cast<int>(strides.size()), ptrs);
  QFLOW_CHECK(ok, "{}: more than {} dimensions remain after collapsing shape {} (CUDA element-wise loop)", op, kMaxDims,
              out.sizes());
  return g;
}

/// A new tensor of `sizes` on `device` for an element-wise result: in the memory order of the
/// first of `like` that has exactly these sizes and is dense (a channels-last activation
/// stays channels-last, Note [Channels-last on the GPU]), row-major otherwise.
inline Tensor empty_for_result(const std::vector<int64_t>& sizes, DType dtype, Device device,
                               std::initializer_list<const Tensor*> like) {
  for (const Tensor* t : like)
    if (t->sizes() == sizes && !t->is_contiguous() && is_dense(*t)) return empty_like_layout(*t, dtype);
  return empty(sizes, dtype, device);
}

/// t converted to dtype (no copy when it already has it): the "to" op, on t's device.
inline Tensor cast_to(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : to_dtype(t, dtype); }

/// The CPU op's shape rule run on a CUDA call's arguments: the same checks, errors, output
/// sizes and dtypes. `op` names the op whose rule applies (the out-of-place form for an
/// in-place kernel); its rule reads the arguments by name, which both forms share.
inline std::vector<TensorMeta> cpu_shape_rule(const OpHandle& op, const OpArgs& a) { return op.get().shape(a); }

/// Refuses a dtype the CUDA kernels of `op` lack, naming op, device and dtype.
inline void check_cuda_dtype(bool supported, std::string_view op, const Tensor& t, DType dtype) {
  QFLOW_CHECK(supported, "{}: no CUDA kernel for dtype {} (tensor on {})", op, dtype, t.device());
}

/// dst (any strides, on a CUDA device) = src broadcast to dst's shape and converted to dst's
/// dtype; src on dst's device. One cudaMemcpyAsync when both are dense in one layout and of one
/// dtype, else one strided kernel (copy_ops.cpp).
void copy_into(const Tensor& dst, const Tensor& src);

}  // namespace qflow::cuda
