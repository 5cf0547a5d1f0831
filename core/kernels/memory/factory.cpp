// Deterministic factories: empty, zeros, ones, full, scalar_tensor, arange, linspace,
// from_vector, from_blob, to_vector. (Random factories live in random.cpp.)
#include "qflow/core/factory.h"

#include <cmath>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

std::vector<TensorMeta> sized_meta(const OpArgs& a) { return one(a.int_list("size"), a.dtype("dtype")); }

Stack empty_kernel(OpArgs& a) { return out(new_tensor(a.int_list("size"), a.dtype("dtype"))); }

Stack full_kernel(OpArgs& a) {
  Tensor t = new_tensor(a.int_list("size"), a.dtype("dtype"));
  fill_(t, a.scalar("fill_value"));
  return out(t);
}
std::vector<TensorMeta> full_meta(const OpArgs& a) { return one(a.int_list("size"), a.dtype("dtype")); }

int64_t arange_length(double start, double end, double step) {
  QFLOW_CHECK(step != 0, "arange: step must be nonzero");
  QFLOW_CHECK((end - start) / step >= 0 || start == end,
              "arange: upper bound {} and lower bound {} inconsistent with step sign {}", end, start, step);
  return static_cast<int64_t>(std::ceil((end - start) / step));
}

std::vector<TensorMeta> arange_meta(const OpArgs& a) {
  return one({arange_length(a.to_double("start"), a.to_double("end"), a.to_double("step"))}, a.dtype("dtype"));
}

Stack arange_kernel(OpArgs& a) {
  const double start = a.to_double("start"), step = a.to_double("step");
  const int64_t n = arange_length(start, a.to_double("end"), step);
  Tensor t = new_tensor({n}, a.dtype("dtype"));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return out(t);
}

std::vector<TensorMeta> linspace_meta(const OpArgs& a) { return one({a.to_int("steps")}, a.dtype("dtype")); }

Stack linspace_kernel(OpArgs& a) {
  const double start = a.to_double("start"), end = a.to_double("end");
  const int64_t steps = a.to_int("steps");
  QFLOW_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got {}", steps);
  Tensor t = new_tensor({steps}, a.dtype("dtype"));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_ptr<T>();
    // Like PyTorch, fill the second half backwards from `end` so both ends are exact.
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i));
  });
  return out(t);
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------
Tensor empty(const IntList& sizes, DType dtype, Device device) {
  if (!device.is_cpu()) {
    // No tensor argument would carry the device to a kernel: allocate here (Note [Devices]).
    const int64_t n = checked_numel(sizes, "empty");
    auto storage = Storage::allocate(static_cast<size_t>(n) * element_size(dtype), device);
    return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
  }
  QFLOW_OP_HANDLE("empty");
  return call_tensor(op, {{"size", sizes}, {"dtype", dtype}});
}
Tensor full(const IntList& sizes, const Scalar& value, std::optional<DType> dtype, Device device) {
  if (!device.is_cpu()) {
    Tensor t = empty(sizes, dtype.value_or(value.default_dtype()), device);
    fill_(t, value);
    return t;
  }
  QFLOW_OP_HANDLE("full");
  return call_tensor(op, {{"size", sizes}, {"fill_value", value}, {"dtype", dtype.value_or(value.default_dtype())}});
}
Tensor zeros(const IntList& sizes, DType dtype, Device device) { return full(sizes, Scalar(0), dtype, device); }
Tensor ones(const IntList& sizes, DType dtype, Device device) { return full(sizes, Scalar(1), dtype, device); }
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype, Device device) {
  return full({}, value, dtype, device);
}
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, const Scalar& value) { return full(t.sizes(), value, t.dtype(), t.device()); }
Tensor arange(const Scalar& end) { return arange(Scalar(0), end); }
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  QFLOW_OP_HANDLE("arange");
  const bool integral = start.is_integral() && end.is_integral() && step.is_integral();
  return call_tensor(op, {{"start", start}, {"end", end}, {"step", step},
                          {"dtype", dtype.value_or(integral ? DType::Int64 : DType::Float32)}});
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntList& sizes) {
  const IntList shape = sizes.empty() ? IntList{static_cast<int64_t>(values.size())} : sizes;
  const int64_t n = checked_numel(shape, "from_vector");
  QFLOW_CHECK(n == static_cast<int64_t>(values.size()), "from_vector: {} values do not fill shape {} ({} elements)",
              values.size(), shape, n);
  Tensor t = kernels::new_tensor(shape, dtype_v<T>);
  std::copy(values.begin(), values.end(), t.data_ptr<T>());
  return t;
}

Tensor from_blob(void* data, const IntList& sizes, const IntList& strides, DType dtype, Storage::Deleter deleter) {
  QFLOW_CHECK(sizes.size() == strides.size(), "from_blob: sizes {} and strides {} differ in length", sizes, strides);
  int64_t extent = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    QFLOW_CHECK(strides[i] >= 0, "from_blob: negative stride {} is not supported", strides[i]);
    extent += (sizes[i] - 1) * strides[i];
  }
  const int64_t n = checked_numel(sizes, "from_blob");
  const size_t nbytes = n == 0 ? 0 : static_cast<size_t>(extent + 1) * element_size(dtype);
  auto storage = Storage::wrap(data, nbytes, std::move(deleter));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, strides, 0, dtype));
}

Tensor from_blob(void* data, const IntList& sizes, DType dtype, Storage::Deleter deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), dtype, std::move(deleter));
}

template <typename T>
std::vector<T> to_vector(const Tensor& t) {
  if (t.defined() && !t.device().is_cpu()) return to_vector<T>(t.detach().to(Device::cpu()));
  // Read in place when no conversion is needed (or float32 into double, which is exact): kernels
  // read their small parameter tensors (scales, zero points) this way on every call, and going
  // through the to_dtype and contiguous ops cost more than their work on a small input.
  if (t.defined() && t.is_contiguous() && !t.impl()->opaque_layout()) {
    if (t.dtype() == dtype_v<T>) return std::vector<T>(t.data_ptr<T>(), t.data_ptr<T>() + t.numel());
    if constexpr (std::is_same_v<T, double>)
      if (t.dtype() == DType::Float32) return std::vector<T>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  Tensor c = contiguous(to_dtype(t.detach(), dtype_v<T>));
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

#define QFLOW_INSTANTIATE_VECTOR_IO(T)                                              \
  template Tensor from_vector<T>(const std::vector<T>& values, const IntList& sizes); \
  template std::vector<T> to_vector<T>(const Tensor& t);
QFLOW_INSTANTIATE_VECTOR_IO(bool)
QFLOW_INSTANTIATE_VECTOR_IO(uint8_t)
QFLOW_INSTANTIATE_VECTOR_IO(int8_t)
QFLOW_INSTANTIATE_VECTOR_IO(int32_t)
QFLOW_INSTANTIATE_VECTOR_IO(int64_t)
QFLOW_INSTANTIATE_VECTOR_IO(float)
QFLOW_INSTANTIATE_VECTOR_IO(double)
#undef QFLOW_INSTANTIATE_VECTOR_IO

}  // namespace qflow

// The registration and typed functions of core/ops/factory.toml (Note [One declaration per op]).
#include "core/ops/factory.inc"
