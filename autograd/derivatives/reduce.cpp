// Derivatives of core/kernels/reduction/reduce.cpp and reduce_minmax.cpp: sum, mean, var, std,
// logsumexp, sum_to, max/min (all, dim), amax/amin. argmax/argmin are not differentiable.
#include <algorithm>
#include <cmath>

#include "qflow/autograd/derivatives.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

SymIntList sym(const std::vector<int64_t>& sizes) { return SymIntList(sizes.begin(), sizes.end()); }

// The reduced dims of a forward call, wrapped and sorted (empty = all; none for a 0-d input).
std::vector<int64_t> reduced_dims(const std::vector<int64_t>& in_sizes, const IntList& dims) {
  const int64_t ndim = static_cast<int64_t>(in_sizes.size());
  std::vector<int64_t> out;
  if (ndim == 0) return out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(d < 0 ? d + ndim : d);
  std::sort(out.begin(), out.end());
  return out;
}

// A reduction's output (or its gradient) with the reduced dims back as size 1, so that it
// broadcasts against the input.
Tensor restore_reduced(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return t;
  Tensor r = t;
  for (int64_t d : dims) r = unsqueeze(r, d);
  return r;
}

int64_t reduced_count(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= in_sizes[d];
  return n;
}

TensorList sum_backward(const BackwardContext& ctx, const TensorList& g) {
  const auto& sizes = ctx.input_sizes("self");
  const auto dims = reduced_dims(sizes, ctx.arg("dim").int_list());
  return {expand(restore_reduced(g[0], dims, ctx.arg("keepdim").to_bool()), sym(sizes))};
}

TensorList mean_backward(const BackwardContext& ctx, const TensorList& g) {
  const auto& sizes = ctx.input_sizes("self");
  const auto dims = reduced_dims(sizes, ctx.arg("dim").int_list());
  const double n = static_cast<double>(reduced_count(sizes, dims));
  return {expand(mul(restore_reduced(g[0], dims, ctx.arg("keepdim").to_bool()), Scalar(1.0 / n)), sym(sizes))};
}

// d var / dx = 2 (x - mean) / (n - ddof); `g` is the gradient of var, dims as in the forward.
Tensor var_grad(const Tensor& g, const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  const double n = static_cast<double>(reduced_count(x.sizes(), dims));
  const double denom = n - (unbiased ? 1.0 : 0.0);
  const Tensor centered = sub(x, mean(x, dims, /*keepdim=*/true));
  return mul(mul(restore_reduced(g, dims, keepdim), centered), Scalar(2.0 / denom));
}

TensorList var_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  return {var_grad(g[0], x, reduced_dims(x.sizes(), ctx.arg("dim").int_list()), ctx.arg("unbiased").to_bool(), ctx.arg("keepdim").to_bool())};
}

// d std = d var / (2 std); where std is 0 the gradient is taken as 0 (PyTorch does the same:
// the true derivative does not exist there).
TensorList std_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const Tensor& result = ctx.output(0);
  const Tensor zero = scalar_tensor(0.0, result.dtype(), result.device());
  const Tensor grad_var = where(eq(result, Scalar(0)), zero, div(g[0], mul(result, Scalar(2))));
  return {var_grad(grad_var, x, reduced_dims(x.sizes(), ctx.arg("dim").int_list()), ctx.arg("unbiased").to_bool(), ctx.arg("keepdim").to_bool())};
}

// d logsumexp / dx = softmax(x) = exp(x - result).
TensorList logsumexp_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const auto dims = reduced_dims(x.sizes(), ctx.arg("dim").int_list());
  const bool keepdim = ctx.arg("keepdim").to_bool();
  const Tensor softmax = exp(sub(x, restore_reduced(ctx.output(0), dims, keepdim)));
  return {mul(restore_reduced(g[0], dims, keepdim), softmax)};
}

TensorList sum_to_backward(const BackwardContext& ctx, const TensorList& g) { return {expand(g[0], sym(ctx.input_sizes("self")))}; }
// d/dself sum_to(self * other) = g (broadcast back) * other, and symmetrically.
TensorList mul_sum_to_backward(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", ctx.needs_grad("self") ? mul(g[0], ctx.input("other")) : Tensor()},
                        {"other", ctx.needs_grad("other") ? mul(g[0], ctx.input("self")) : Tensor()}});
}

// max()/min() of everything: the gradient is shared evenly among the elements equal to the
// result (NaN results: among the NaNs), as PyTorch 1.13 does.
TensorList all_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const Tensor& result = ctx.output(0);
  const double r = result.item<double>();
  const Tensor mask = (std::isnan(r) ? ne(x, x) : eq(x, result)).to(x.dtype());
  return {mul(mask, div(g[0], sum(mask)))};
}

// amax/amin: evenly among the ties of each reduced slice (PyTorch's scale_grad_by_count).
TensorList amax_backward(const BackwardContext& ctx, const TensorList& g) {
  const Tensor& x = ctx.input("self");
  const auto dims = reduced_dims(x.sizes(), ctx.arg("dim").int_list());
  const bool keepdim = ctx.arg("keepdim").to_bool();
  const Tensor mask = eq(x, restore_reduced(ctx.output(0), dims, keepdim)).to(x.dtype());
  const Tensor count = sum(mask, dims, /*keepdim=*/true);
  return {mul(mask, div(restore_reduced(g[0], dims, keepdim), count))};
}

// max.dim/min.dim: the gradient goes to the reported index only.
TensorList dim_backward(const BackwardContext& ctx, const TensorList& g) {
  static const OpHandle op("value_selecting_reduction_backward");
  return {call_tensor(op, {g[0], ctx.arg("dim").to_int(), ctx.output(1), ctx.input_sizes("self"), ctx.arg("keepdim").to_bool()})};
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/reduce.derivatives.inc"
