// Value-selecting reductions: max/min of everything, max/min along a dim (values and
// indices), argmax/argmin, amax/amin, and value_selecting_reduction_backward (the gradient
// of max.dim/min.dim). Loops: reduce_loop.h (see Note [Reduction loops]).
//
// Ties report the first position and NaN beats every number (the first NaN is reported),
// like PyTorch. Reducing over an empty dim is an error: a maximum of nothing does not exist.
#include <vector>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/opaque_tensor.h"
#include "qflow/core/ops.h"
#include "kernels/reduction/reduce_loop.h"
#include "kernels/reduction/reducers.h"

namespace qflow {
namespace kernels {
namespace {

constexpr const char* extremum_name(bool is_max) { return is_max ? "max" : "min"; }

void check_nonempty_dims(const Tensor& x, const std::vector<int64_t>& dims, std::string_view op) {
  for (int64_t d : dims)
    QFLOW_CHECK(x.sizes()[d] != 0, "{}: cannot reduce over dimension {} of size 0 (input shape {})", op, d, x.sizes());
}

void check_nonempty(const Tensor& x, std::string_view op) {
  QFLOW_CHECK(x.numel() != 0,
              "{}: cannot reduce an empty tensor of shape {} over all dimensions (specify a dim to reduce over)", op,
              x.sizes());
}

template <bool IsMax>
void extremum_into(const Tensor& o, const Tensor& x, const std::vector<int64_t>& dims) {
  const ReducePlan plan = make_reduce_plan(x, dims, /*keep_order=*/false);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce(plan, x.data_ptr<T>(), ExtremumReducer<T, IsMax>{o.data_ptr<T>()});
  });
}

// values (optional) and indices of x reduced over dims, positions in row-major order.
template <bool IsMax>
void arg_extremum_into(const Tensor& values, const Tensor& indices, const Tensor& x, const std::vector<int64_t>& dims) {
  const ReducePlan plan = make_reduce_plan(x, dims, /*keep_order=*/true);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* v = values.defined() ? values.data_ptr<T>() : nullptr;
    reduce(plan, x.data_ptr<T>(), ArgExtremumReducer<T, IsMax>{v, indices.data_ptr<int64_t>()});
  });
}

// ---- max.all / min.all ----------------------------------------------------------------------

template <bool IsMax>
std::vector<TensorMeta> all_meta(const OpArgs& a) {
  check_nonempty(a.tensor("self"), extremum_name(IsMax));
  return one({}, a.tensor("self").dtype());
}

// x: any shape → () holding the extremum.
template <bool IsMax>
Stack all_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  check_nonempty(x, extremum_name(IsMax));
  Tensor o = new_tensor({}, x.dtype());
  extremum_into<IsMax>(o, x, reduction_dims(x, {}, extremum_name(IsMax)));
  return out(o);
}

// ---- max.dim / min.dim ----------------------------------------------------------------------

template <bool IsMax>
std::vector<int64_t> dim_of(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = reduction_dims(x, {a.to_int("dim")}, extremum_name(IsMax));
  check_nonempty_dims(x, dims, extremum_name(IsMax));
  return dims;
}

template <bool IsMax>
std::vector<TensorMeta> dim_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  auto shape = reduced_shape(x.sizes(), dim_of<IsMax>(a), a.to_bool("keepdim"));
  return {TensorMeta{shape, x.dtype()}, TensorMeta{shape, DType::Int64}};
}

// x: (..., n, ...) → values and int64 indices of shape (..., ...) or (..., 1, ...) (keepdim).
template <bool IsMax>
Stack dim_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = dim_of<IsMax>(a);
  const auto shape = reduced_shape(x.sizes(), dims, a.to_bool("keepdim"));
  Tensor values = new_tensor(shape, x.dtype());
  Tensor indices = new_tensor(shape, DType::Int64);
  arg_extremum_into<IsMax>(values, indices, x, dims);
  return Stack{Value(values), Value(indices)};
}

// ---- argmax / argmin ------------------------------------------------------------------------

// dim=None reduces the flattened tensor (keepdim then keeps every dim as size 1).
template <bool IsMax>
std::vector<int64_t> arg_dims(const OpArgs& a) {
  const char* op = IsMax ? "argmax" : "argmin";
  const Tensor& x = a.tensor("self");
  const std::optional<int64_t> dim = a.optional_int("dim");
  if (!dim) {
    check_nonempty(x, op);
    return reduction_dims(x, {}, op);
  }
  const auto dims = reduction_dims(x, {*dim}, op);
  check_nonempty_dims(x, dims, op);
  return dims;
}

template <bool IsMax>
std::vector<TensorMeta> arg_meta(const OpArgs& a) {
  return one(reduced_shape(a.tensor("self").sizes(), arg_dims<IsMax>(a), a.to_bool("keepdim")), DType::Int64);
}

template <bool IsMax>
Stack arg_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = arg_dims<IsMax>(a);
  Tensor indices = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), DType::Int64);
  arg_extremum_into<IsMax>(Tensor(), indices, x, dims);
  return out(indices);
}

// ---- amax / amin ----------------------------------------------------------------------------

template <bool IsMax>
std::vector<int64_t> amax_dims(const OpArgs& a) {
  const char* op = IsMax ? "amax" : "amin";
  const Tensor& x = a.tensor("self");
  const auto dims = reduction_dims(x, a.int_list("dim"), op);
  check_nonempty_dims(x, dims, op);
  return dims;
}

template <bool IsMax>
std::vector<TensorMeta> amax_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(reduced_shape(x.sizes(), amax_dims<IsMax>(a), a.to_bool("keepdim")), x.dtype());
}

template <bool IsMax>
Stack amax_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = amax_dims<IsMax>(a);
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), x.dtype());
  extremum_into<IsMax>(o, x, dims);
  return out(o);
}

// A whole-tensor extremum of a blocked activation (an observer's range) reads its storage as it
// is: the order of the elements does not matter (Note [Opaque layouts]).
template <bool IsMax>
Stack amax_blocked_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = amax_dims<IsMax>(a);
  if (!is_unpadded_opaque(x) || static_cast<int64_t>(dims.size()) != x.dim()) {
    make_plain_args(a);
    return amax_kernel<IsMax>(a);
  }
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), x.dtype());
  extremum_into<IsMax>(o, opaque_storage_as_flat(x), {0});
  return out(o);
}

// ---- value_selecting_reduction_backward -----------------------------------------------------

struct SelectGeometry {
  int64_t dim, outer, n, inner;
};

// grad, indices: `sizes` reduced over dim (keepdim or not) → zeros of `sizes` with grad[k]
// written at position indices[k] along dim (PyTorch's op of the same name).
SelectGeometry select_geometry(const OpArgs& a) {
  constexpr const char* op = "value_selecting_reduction_backward";
  const Tensor& grad = a.tensor("grad");
  const Tensor& indices = a.tensor("indices");
  const auto sizes = a.int_list("sizes");
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  SelectGeometry g{wrap_dim(a.to_int("dim"), ndim, op), 1, 1, 1};
  for (int64_t d = 0; d < ndim; ++d) (d < g.dim ? g.outer : d == g.dim ? g.n : g.inner) *= sizes[d];
  QFLOW_CHECK(indices.dtype() == DType::Int64, "{}: indices must be int64, got {}", op, indices.dtype());
  QFLOW_CHECK(grad.sizes() == indices.sizes(), "{}: grad of shape {} and indices of shape {} differ", op, grad.sizes(),
              indices.sizes());
  const std::vector<int64_t> dims = ndim == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{g.dim};
  const auto expected = reduced_shape(sizes, dims, a.to_bool("keepdim"));
  QFLOW_CHECK(grad.sizes() == expected, "{}: grad of shape {} does not match input shape {} reduced over dim {} ({})", op,
              grad.sizes(), sizes, g.dim, expected);
  return g;
}

std::vector<TensorMeta> select_backward_meta(const OpArgs& a) {
  select_geometry(a);
  return one(a.int_list("sizes"), a.tensor("grad").dtype());
}

Stack select_backward_kernel(OpArgs& a) {
  const SelectGeometry g = select_geometry(a);
  const Tensor grad = a.tensor("grad").contiguous();
  const Tensor indices = a.tensor("indices").contiguous();
  Tensor o = zeros(a.int_list("sizes"), grad.dtype());
  const int64_t* idx = indices.data_ptr<int64_t>();
  for (int64_t k = 0; k < indices.numel(); ++k)  // checked up front: no throwing inside threads
    QFLOW_CHECK(idx[k] >= 0 && idx[k] < g.n, "value_selecting_reduction_backward: index {} out of range for dimension {} of size {}",
                idx[k], g.dim, g.n);
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = grad.data_ptr<T>();
    T* dst = o.data_ptr<T>();
    parallel_for(g.outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        for (int64_t j = 0; j < g.inner; ++j) dst[(i * g.n + idx[i * g.inner + j]) * g.inner + j] = src[i * g.inner + j];
    });
  });
  return out(o);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/reduce_minmax.toml (Note [One declaration per op]).
#include "core/ops/reduce_minmax.inc"
