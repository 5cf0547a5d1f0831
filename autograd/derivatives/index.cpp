// Derivatives of core/kernels/memory/index.cpp: cat and stack hand each input its slice of the
// gradient; index_select scatters the gradient back with index_add, whose own derivative
// gathers it again with index_select.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {
namespace {

// Inputs of shape (0,) were skipped by cat (PyTorch's legacy placeholders); the dim is wrapped
// against the first input that was not.
// `tensors` is the only tensor argument of cat and stack, so the k-th gradient of the list is
// the k-th flat gradient.
TensorList cat_backward(const BackwardContext& ctx, const TensorList& g) {
  const size_t count = ctx.list_size("tensors");
  auto skipped = [&](size_t k) { return ctx.input_sizes("tensors", k) == std::vector<int64_t>{0}; };
  int64_t ndim = 1;
  for (size_t k = 0; k < count; ++k) {
    if (!skipped(k)) {
      ndim = static_cast<int64_t>(ctx.input_sizes("tensors", k).size());
      break;
    }
  }
  int64_t dim = ctx.arg("dim").to_int();
  if (dim < 0) dim += ndim;
  TensorList grads;
  int64_t offset = 0;
  for (size_t k = 0; k < count; ++k) {
    const bool wanted = ctx.needs_grad("tensors", k);
    if (skipped(k)) {
      grads.push_back(wanted ? zeros({0}, g[0].dtype(), g[0].device()) : Tensor());
      continue;
    }
    const int64_t n = ctx.input_sizes("tensors", k)[static_cast<size_t>(dim)];
    grads.push_back(wanted ? narrow(g[0], dim, offset, n) : Tensor());
    offset += n;
  }
  return grads;
}

TensorList stack_backward(const BackwardContext& ctx, const TensorList& g) {
  TensorList grads;
  const int64_t dim = ctx.arg("dim").to_int();
  for (size_t k = 0; k < ctx.list_size("tensors"); ++k)
    grads.push_back(ctx.needs_grad("tensors", k) ? select(g[0], dim, static_cast<int64_t>(k)) : Tensor());
  return grads;
}

TensorList index_select_backward(const BackwardContext& ctx, const TensorList& g) {
  const int64_t dim = ctx.arg("dim").to_int();
  return ctx.gradients(
      {{"self", index_add(zeros(ctx.input_sizes("self"), g[0].dtype(), g[0].device()), dim, ctx.input("index"), g[0])}});
}

// index_add(self, dim, index, source, alpha): self passes through; each source row went to
// one place, so its gradient is that place's gradient times alpha.
TensorList index_add_backward(const BackwardContext& ctx, const TensorList& g) {
  Tensor g_source;
  if (ctx.needs_grad("source")) {
    g_source = index_select(g[0], ctx.arg("dim").to_int(), ctx.input("index")).mul(ctx.arg("alpha").scalar());
    // A 0-d source took a one-element index; index_select keeps that as a 1-element dim.
    const std::vector<int64_t>& want = ctx.input_sizes("source");
    if (g_source.sizes() != want) g_source = g_source.reshape(SymIntList(want.begin(), want.end()));
  }
  return ctx.gradients({{"self", g[0]}, {"source", g_source}});
}

}  // namespace

}  // namespace qflow::autograd

#include "autograd/derivatives/index.derivatives.inc"
