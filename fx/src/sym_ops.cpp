// The size ops a traced graph uses to keep shapes symbolic (see Note [Symbolic sizes in fx]):
// sym_size reads one dimension of a tensor, sym_add/sub/mul/div/mod combine sizes. They are
// declared (fx/ops/sym.toml) like any core op so a graph node re-runs them by name; their kernels compute
// with SymInt arithmetic, so running them on proxies (tracing a GraphModule again) records
// new size nodes instead of specialising.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/op_registry.h"
#include "qflow/core/value.h"

namespace qflow::fx {

namespace {

std::vector<TensorMeta> no_tensor_output(const OpArgs&) { return {}; }

// self: any tensor; dim: wrapped like Tensor::size.
Stack sym_size_kernel(OpArgs& a) { return Stack{Value(a.tensor("self").size(a.to_int("dim")))}; }

template <char Op>
Stack sym_binary_kernel(OpArgs& a) {
  return Stack{Value(sym_binary(Op, a["a"].sym_int(), a["b"].sym_int()))};
}

}  // namespace

}  // namespace qflow::fx

// The registration and derivative declarations of fx/ops/sym.toml (Note [One declaration per op]).
#include "fx/ops/sym.inc"
#include "fx/src/sym_ops.derivatives.inc"
