// CUDA kernels of the reductions of reduce.cpp (sum, mean, var, std, logsumexp, sum_to,
// mul_sum_to) and reduce_minmax.cpp (max.all, min.all, max.dim, min.dim, argmax, argmin,
// amax, amin, value_selecting_reduction_backward). Each runs the CPU op's shape rule (same
// checks, errors, output sizes and dtypes), plans the reduction over the input's strides as
// they are (no copy for channels-last or other views) and launches one kernel (plus an ordered
// combine when the reduced positions are split across blocks), Note [CUDA reductions].
#include <vector>

#include "kernels/reduce.cuh"
#include "kernels/tensor_geometry.h"
#include "qflow/core/factory.h"

namespace qflow::cuda {
namespace {

Stack one_out(Tensor t) { return Stack{Value(std::move(t))}; }

// The dims reduced by `dims` (empty: all; a 0-d tensor reduces over nothing), wrapped. The
// CPU shape rule has validated them (range, repeats) before this runs.
std::vector<bool> reduced_mask(const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  if (nd == 0) return mask;
  for (int64_t d : dims) mask[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  return mask;
}

// reduce.cpp's sum_to_dims: the leading dims x has beyond `sizes`, and the dims `sizes` has as 1.
std::vector<bool> sum_to_mask(const Tensor& x, const std::vector<int64_t>& sizes) {
  const int64_t lead = x.dim() - static_cast<int64_t>(sizes.size());
  std::vector<bool> mask(static_cast<size_t>(x.dim()), false);
  for (int64_t d = 0; d < x.dim(); ++d)
    mask[static_cast<size_t>(d)] = d < lead || sizes[static_cast<size_t>(d - lead)] != x.sizes()[static_cast<size_t>(d)];
  return mask;
}

int64_t reduce_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) n *= x.sizes()[d];
  return n;
}

// Runs `args` over x (and y, MulSum) reduced where `mask` is set. args.out/indices are set by
// the caller; the input pointers and dtypes here.
void reduce_into(ReduceArgs args, const Tensor& x, const Tensor* y, const std::vector<bool>& mask, bool keep_order,
                 const char* op) {
  args.in_dtype = scalar_type(x.dtype());
  QFLOW_CHECK(reduce_supports(args), "{}: no CUDA kernel for dtype {} (tensor on {})", op, x.dtype(), x.device());
  Tensor xs = x, ys = y ? *y : Tensor();
  ReduceGeometry g;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int64_t* strides[2] = {xs.strides().data(), ys.defined() ? ys.strides().data() : xs.strides().data()};
    bool plain[64] = {};  // std::vector<bool> has no data()
    for (size_t d = 0; d < mask.size() && d < 64; ++d) plain[d] = mask[d];
    if (make_reduce_geometry(g, static_cast<int>(xs.dim()), xs.sizes().data(), ys.defined() ? 2 : 1, strides, plain,
                             keep_order))
      break;
    QFLOW_CHECK(attempt == 0, "{}: more than {} dimensions remain after collapsing shape {} (CUDA reduction)", op,
                kMaxDims, x.sizes());
    xs = contiguous(xs);  // contiguous dims merge wherever the kept/reduced pattern allows
    if (ys.defined()) ys = contiguous(ys);
  }
  args.in0 = device_ptr(xs);
  args.in1 = ys.defined() ? device_ptr(ys) : nullptr;
  const size_t bytes = reduce_workspace_bytes(args, g);
  std::shared_ptr<Storage> ws = bytes > 0 ? workspace(bytes, x.device()) : nullptr;
  Launch launch(x);
  launch_reduce(args, g, ws ? ws->data() : nullptr, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
}

ReduceArgs args_for(ReduceOp op, const Tensor& out) {
  ReduceArgs a;
  a.op = op;
  a.out = device_ptr(out);
  a.out_dtype = scalar_type(out.dtype());
  return a;
}

// ---- sum / mean / var / std / logsumexp ------------------------------------------------------------

Stack sum_kernel(OpArgs& a) {
  static const OpHandle op("sum");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor o = empty(m.sizes, m.dtype, x.device());
  reduce_into(args_for(ReduceOp::Sum, o), x, nullptr, reduced_mask(x, a.int_list("dim")), false, "sum");
  return one_out(o);
}

// Empty reductions give NaN (0 * inf), like the CPU's 0 / 0.
Stack mean_kernel(OpArgs& a) {
  static const OpHandle op("mean");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const auto mask = reduced_mask(x, a.int_list("dim"));
  Tensor o = empty(m.sizes, m.dtype, x.device());
  ReduceArgs args = args_for(ReduceOp::Sum, o);
  args.scale = 1.0 / static_cast<double>(reduce_count(x, mask));
  reduce_into(args, x, nullptr, mask, false, "mean");
  return one_out(o);
}

template <bool Sqrt>
Stack var_kernel(OpArgs& a) {
  static const OpHandle op(Sqrt ? "std" : "var");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor o = empty(m.sizes, m.dtype, x.device());
  ReduceArgs args = args_for(Sqrt ? ReduceOp::Std : ReduceOp::Var, o);
  args.ddof = a.to_bool("unbiased") ? 1.0 : 0.0;
  reduce_into(args, x, nullptr, reduced_mask(x, a.int_list("dim")), false, Sqrt ? "std" : "var");
  return one_out(o);
}

// Integral inputs are reduced as float32 (the CPU's rule).
Stack logsumexp_kernel(OpArgs& a) {
  static const OpHandle op("logsumexp");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor x = cast_to(a.tensor("self"), m.dtype);
  Tensor o = empty(m.sizes, m.dtype, x.device());
  reduce_into(args_for(ReduceOp::LogSumExp, o), x, nullptr, reduced_mask(x, a.int_list("dim")), false, "logsumexp");
  return one_out(o);
}

// ---- sum_to / mul_sum_to ------------------------------------------------------------------------

// x → `size`, x's dtype: one kernel whatever x's layout (a channels-last (N, C, H, W) gradient
// to (1, C, 1, 1) or (C) reads its channels as adjacent columns).
Stack sum_to_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto sizes = a.int_list("size");
  if (x.sizes() == sizes) return one_out(x);
  static const OpHandle op("sum_to");
  cpu_shape_rule(op, a);
  Tensor o = empty(sizes, x.dtype(), x.device());
  reduce_into(args_for(ReduceOp::Sum, o), x, nullptr, sum_to_mask(x, sizes), false, "sum_to");
  return one_out(o);
}

// sum_to(self * other, size) without writing the product.
Stack mul_sum_to_kernel(OpArgs& a) {
  static const OpHandle op("mul_sum_to");
  cpu_shape_rule(op, a);
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  const auto sizes = a.int_list("size");
  Tensor o = empty(sizes, x.dtype(), x.device());
  reduce_into(args_for(ReduceOp::MulSum, o), x, &y, sum_to_mask(x, sizes), false, "mul_sum_to");
  return one_out(o);
}

// ---- max / min / argmax / argmin / amax / amin ------------------------------------------------------

template <bool IsMax>
Stack all_kernel(OpArgs& a) {
  static const OpHandle op(IsMax ? "max.all" : "min.all");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor o = empty(m.sizes, m.dtype, x.device());
  reduce_into(args_for(IsMax ? ReduceOp::Max : ReduceOp::Min, o), x, nullptr, reduced_mask(x, {}), false,
              IsMax ? "max" : "min");
  return one_out(o);
}

template <bool IsMax>
Stack dim_kernel(OpArgs& a) {
  static const OpHandle op(IsMax ? "max.dim" : "min.dim");
  const auto metas = cpu_shape_rule(op, a);
  const Tensor& x = a.tensor("self");
  Tensor values = empty(metas[0].sizes, metas[0].dtype, x.device());
  Tensor indices = empty(metas[1].sizes, DType::Int64, x.device());
  ReduceArgs args = args_for(IsMax ? ReduceOp::ArgMax : ReduceOp::ArgMin, values);
  args.indices = device_ptr_as<int64_t>(indices);
  reduce_into(args, x, nullptr, reduced_mask(x, {a.to_int("dim")}), true, IsMax ? "max" : "min");
  return Stack{Value(values), Value(indices)};
}

template <bool IsMax>
Stack arg_kernel(OpArgs& a) {
  static const OpHandle op(IsMax ? "argmax" : "argmin");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const std::optional<int64_t> dim = a.optional_int("dim");
  Tensor indices = empty(m.sizes, DType::Int64, x.device());
  ReduceArgs args;
  args.op = IsMax ? ReduceOp::ArgMax : ReduceOp::ArgMin;
  args.out = nullptr;
  args.out_dtype = scalar_type(x.dtype());
  args.indices = device_ptr_as<int64_t>(indices);
  const auto mask = dim ? reduced_mask(x, {*dim}) : reduced_mask(x, {});
  reduce_into(args, x, nullptr, mask, true, IsMax ? "argmax" : "argmin");
  return one_out(indices);
}

template <bool IsMax>
Stack amax_kernel(OpArgs& a) {
  static const OpHandle op(IsMax ? "amax" : "amin");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor o = empty(m.sizes, m.dtype, x.device());
  reduce_into(args_for(IsMax ? ReduceOp::Max : ReduceOp::Min, o), x, nullptr, reduced_mask(x, a.int_list("dim")),
              false, IsMax ? "amax" : "amin");
  return one_out(o);
}

// zeros of `sizes` with grad[k] written at indices[k] along dim (reduce_minmax.cpp). The index
// range is checked on the device (a trap) rather than by copying the indices to the host.
Stack select_backward_kernel(OpArgs& a) {
  static const OpHandle op("value_selecting_reduction_backward");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor grad = contiguous(a.tensor("grad"));
  const Tensor indices = contiguous(a.tensor("indices"));
  const auto sizes = a.int_list("sizes");
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  int64_t dim = a.to_int("dim");
  if (dim < 0) dim += ndim == 0 ? 1 : ndim;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < ndim; ++d) (d < dim ? outer : d == dim ? n : inner) *= sizes[static_cast<size_t>(d)];
  Tensor o = zeros(sizes, m.dtype, grad.device());
  Launch launch(o);
  launch_select_backward(scalar_type(m.dtype), device_ptr(o), device_ptr(grad), device_ptr_as<int64_t>(indices), outer,
                         n, inner, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("value_selecting_reduction_backward");
  return one_out(o);
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/reduce_ops.cuda.inc"
