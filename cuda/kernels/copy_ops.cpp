// CUDA kernels of copy.cpp's ops (Note [CUDA kernel files]): to (dtype conversion), clone,
// contiguous, copy_ (from any device: a source elsewhere is moved to self's device first),
// fill_ and zero_. detach, item and to_device are device-generic on the CPU side (they only
// alias or copy through the DeviceRuntime).
#include <cmath>

#include "kernels/copy.cuh"
#include "kernels/tensor_geometry.h"
#include "qflow/core/factory.h"

namespace qflow::cuda {

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const StridedGeometry g = geometry_of(dst, {&src}, "copy");
  Launch launch(dst);
  if (g.dense && dst.dtype() == src.dtype()) {
    // Both dense in one layout (the geometry collapsed to one unit-stride dim): their bytes are
    // the same sequence, from each one's element 0 (its lowest address).
    QFLOW_CUDA_CHECK(cudaMemcpyAsync(device_ptr(dst), device_ptr(src), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                     launch.stream),
                     "copy");
    return;
  }
  launch_cast(scalar_type(dst.dtype()), scalar_type(src.dtype()), g, device_ptr(dst), device_ptr(src), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("copy");
}

namespace {

Stack one_out(Tensor t) { return Stack{Value(std::move(t))}; }

// A new tensor of x's sizes in x's layout (dense) or row-major, converted to `dtype`.
Stack to_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  Tensor y = empty_like_layout(x, a.dtype("dtype"));
  copy_into(y, x);
  return one_out(y);
}

// Dense inputs keep their memory layout (a channels-last activation stays channels-last).
Stack clone_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  Tensor y = empty_like_layout(x);
  copy_into(y, x);
  return one_out(y);
}

Stack contiguous_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  if (x.is_contiguous()) return one_out(x);
  Tensor y = empty(x.sizes(), x.dtype(), x.device());
  copy_into(y, x);
  return one_out(y);
}

Stack copy__kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  if (a.tensor("src").device() != self.device()) a.tensor("src") = to_device(a.tensor("src"), self.device());
  const Tensor& src = a.tensor("src");
  // copy.cpp's broadcast rule: src must broadcast to self's shape.
  bool ok = self.sizes().size() >= src.sizes().size();
  for (size_t i = 0; ok && i < src.sizes().size(); ++i) {
    const int64_t ds = src.sizes()[src.sizes().size() - 1 - i];
    const int64_t dd = self.sizes()[self.sizes().size() - 1 - i];
    ok = ds == dd || ds == 1;
  }
  QFLOW_CHECK(ok, "copy_: source of shape {} cannot be broadcast to destination shape {}", src.sizes(), self.sizes());
  // Reading and writing the same memory through different strides would be order-dependent.
  const Tensor source = (src.impl()->storage() == self.impl()->storage() && !src.is_same(self)) ? clone(src) : src;
  copy_into(self, source);
  self.impl()->storage()->bump_version();
  return one_out(self);
}

// True when `v` converted to `dtype` is all zero bytes (0, false, +0.0; not -0.0).
bool zero_bytes(const Scalar& v, DType dtype) {
  if (is_floating(dtype)) return v.to_double() == 0.0 && !std::signbit(v.to_double());
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return v.to<T>() == T(0);
  });
}

Stack fill_with(Tensor& self, const Scalar& v) {
  if (self.numel() > 0) {
    const StridedGeometry g = geometry_of(self, {}, "fill_");
    Launch launch(self);
    if (g.dense && zero_bytes(v, self.dtype())) {
      QFLOW_CUDA_CHECK(cudaMemsetAsync(device_ptr(self), 0, self.nbytes(), launch.stream), "fill_");
    } else {
      launch_fill(scalar_type(self.dtype()), g, device_ptr(self), scalar_arg(v), launch.stream);
      QFLOW_CUDA_CHECK_LAUNCH("fill_");
    }
  }
  self.impl()->storage()->bump_version();
  return one_out(self);
}

Stack fill__kernel(OpArgs& a) { return fill_with(a.tensor("self"), a.scalar("value")); }
Stack zero__kernel(OpArgs& a) { return fill_with(a.tensor("self"), Scalar(0)); }

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/copy_ops.cuda.inc"
