// Derivatives of core/kernels/memory/shape.cpp: the views. A view only re-reads the input's
// elements, so its gradient puts each output gradient back where the element came from:
// a reshape back to the input's sizes, the inverse permutation, a scatter into zeros for
// the ops that drop elements (narrow, slice, select), a sum for expand.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

SymIntList sym(const std::vector<int64_t>& sizes) { return SymIntList(sizes.begin(), sizes.end()); }

int64_t wrap(int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  return dim < 0 ? dim + n : dim;
}

// For reshape-like ops (view, reshape, flatten, squeeze, unsqueeze) the gradient has the
// same elements in the same order: reshape it back.
TensorList reshape_backward(const BackwardContext& ctx, const TensorList& g) { return {reshape(g[0], sym(ctx.input_sizes("self")))}; }

TensorList permute_backward(const BackwardContext& ctx, const TensorList& g) {
  const IntList dims = ctx.arg("dims").int_list();
  const int64_t ndim = static_cast<int64_t>(dims.size());
  IntList inverse(dims.size());
  for (int64_t i = 0; i < ndim; ++i) inverse[static_cast<size_t>(wrap(dims[i], ndim))] = i;
  return {permute(g[0], inverse)};
}

TensorList transpose_backward(const BackwardContext& ctx, const TensorList& g) {
  return {transpose(g[0], ctx.arg("dim0").to_int(), ctx.arg("dim1").to_int())};
}
TensorList t_backward(const BackwardContext&, const TensorList& g) { return {t(g[0])}; }

// Gradient of an op that reads a sub-view of its input: zeros of the input's shape with the
// gradient written through the same view (so any step or offset is honoured exactly).
template <typename ViewFn>
Tensor scatter_into_zeros(const BackwardContext& ctx, const Tensor& grad, const ViewFn& view_of) {
  Tensor result = zeros(ctx.input_sizes("self"), grad.dtype(), grad.device());
  Tensor window = view_of(result);
  copy_(window, grad);
  return result;
}

TensorList narrow_backward(const BackwardContext& ctx, const TensorList& g) {
  return {scatter_into_zeros(ctx, g[0], [&](const Tensor& r) {
    return narrow(r, ctx.arg("dim").to_int(), ctx.arg("start").to_int(), ctx.arg("length").to_int());
  })};
}
TensorList slice_backward(const BackwardContext& ctx, const TensorList& g) {
  return {scatter_into_zeros(ctx, g[0], [&](const Tensor& r) {
    return slice(r, ctx.arg("dim").to_int(), ctx.arg("start").optional_int(), ctx.arg("end").optional_int(),
                 ctx.arg("step").to_int());
  })};
}
TensorList select_backward(const BackwardContext& ctx, const TensorList& g) {
  return {scatter_into_zeros(ctx, g[0], [&](const Tensor& r) { return select(r, ctx.arg("dim").to_int(), ctx.arg("index").to_int()); })};
}

// Every input element was read by all the outputs it was broadcast to.
TensorList expand_backward(const BackwardContext& ctx, const TensorList& g) { return {sum_to(g[0], ctx.input_sizes("self"))}; }

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/shape.derivatives.inc"
