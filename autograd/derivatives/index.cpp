// Derivatives of core/kernels/index.cpp: cat and stack hand each input its slice of the
// gradient; index_select scatters the gradient back with index_add, whose own derivative
// gathers it again with index_select.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// Inputs of shape (0,) were skipped by cat (PyTorch's legacy placeholders); the dim is wrapped
// against the first input that was not.
TensorList cat_backward(const BackwardContext& ctx, const TensorList& g) {
  auto skipped = [&](size_t i) { return ctx.input_sizes(i) == std::vector<int64_t>{0}; };
  int64_t ndim = 1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!skipped(i)) {
      ndim = static_cast<int64_t>(ctx.input_sizes(i).size());
      break;
    }
  }
  int64_t dim = ctx.arg(1).to_int();
  if (dim < 0) dim += ndim;
  TensorList grads;
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (skipped(i)) {
      grads.push_back(ctx.needs_grad(i) ? zeros({0}, g[0].dtype()) : Tensor());
      continue;
    }
    const int64_t n = ctx.input_sizes(i)[static_cast<size_t>(dim)];
    grads.push_back(ctx.needs_grad(i) ? narrow(g[0], dim, offset, n) : Tensor());
    offset += n;
  }
  return grads;
}

TensorList stack_backward(const BackwardContext& ctx, const TensorList& g) {
  TensorList grads;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    grads.push_back(ctx.needs_grad(i) ? select(g[0], ctx.arg(1).to_int(), static_cast<int64_t>(i)) : Tensor());
  return grads;
}

TensorList index_select_backward(const BackwardContext& ctx, const TensorList& g) {
  const int64_t dim = ctx.arg(1).to_int();
  return {index_add(zeros(ctx.input_sizes(0), g[0].dtype()), dim, ctx.input(1), g[0]), Tensor()};
}

// index_add(self, dim, index, source, alpha): self passes through; each source row went to
// one place, so its gradient is that place's gradient times alpha.
TensorList index_add_backward(const BackwardContext& ctx, const TensorList& g) {
  Tensor g_source;
  if (ctx.needs_grad(2)) {
    g_source = index_select(g[0], ctx.arg(1).to_int(), ctx.input(1)).mul(ctx.arg(4).scalar());
    // A 0-d source took a one-element index; index_select keeps that as a 1-element dim.
    const std::vector<int64_t>& want = ctx.input_sizes(2);
    if (g_source.sizes() != want) g_source = g_source.reshape(SymIntList(want.begin(), want.end()));
  }
  return {g[0], Tensor(), g_source};
}

}  // namespace

QFLOW_REGISTER_DERIVATIVES(index) {
  registry.def("cat", {.node_name = "CatBackward", .backward = cat_backward});
  registry.def("stack", {.node_name = "StackBackward", .backward = stack_backward});
  registry.def("index_select",
               {.node_name = "IndexSelectBackward", .save_inputs = save_inputs({1}), .backward = index_select_backward});
  registry.def("index_add", {.node_name = "IndexAddBackward", .save_inputs = save_inputs({1}), .backward = index_add_backward});
}

}  // namespace qflow::autograd
