// Dropout: native_dropout (output and keep-mask) and native_dropout_backward.
//
// Note [Dropout keeps its mask]
// The gradient of dropout is grad * mask / (1 - p), and the mask cannot be recovered from the
// input and output (a kept zero looks like a dropped element) nor redrawn (the generator has
// moved on). So the registered op is native_dropout, returning (output, mask) like PyTorch's
// aten op; its derivative reads the saved mask. The typed dropout() returns the output only.
// When dropout is the identity (eval, or p == 0) the input itself is returned, like PyTorch's
// F.dropout, and the mask is an all-true zero-stride view: no copy, no allocation per element.
#include <vector>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

void check_dropout(const Tensor& x, double p) {
  QFLOW_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got {}", p);
  QFLOW_CHECK(is_floating(x.dtype()), "dropout: expected a floating point tensor, got {}", x.dtype());
}

// x: any shape → (y, mask) of x's shape, mask bool.
std::vector<TensorMeta> native_dropout_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("input");
  check_dropout(x, a.to_double("p"));
  return {TensorMeta{x.sizes(), x.dtype()}, TensorMeta{x.sizes(), DType::Bool}};
}

// An all-true bool tensor of `sizes` backed by a single element.
Tensor all_true(const std::vector<int64_t>& sizes) {
  Tensor one = full({1}, true, DType::Bool);
  return make_view(one, sizes, std::vector<int64_t>(sizes.size(), 0), 0);
}

Stack native_dropout_kernel(OpArgs& a) {
  const Tensor& input = a.tensor("input");
  const double p = a.to_double("p");
  const bool train = a.to_bool("train");
  check_dropout(input, p);
  if (!train || p == 0.0) return Stack{Value(input), Value(all_true(input.sizes()))};
  if (p == 1.0) return Stack{Value(zeros(input.sizes(), input.dtype())), Value(zeros(input.sizes(), DType::Bool))};

  const Tensor x = contiguous(input);
  const Tensor u = rand_like(x);  // uniform [0, 1) from the current generator
  Tensor y = new_tensor(x.sizes(), x.dtype());
  Tensor mask = new_tensor(x.sizes(), DType::Bool);
  visit_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T keep_prob = static_cast<T>(1.0 - p), scale = static_cast<T>(1.0 / (1.0 - p));
    const T* px = x.data_ptr<T>();
    const T* pu = u.data_ptr<T>();
    T* py = y.data_ptr<T>();
    bool* pm = mask.data_ptr<bool>();
    parallel_for(x.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const bool keep = pu[i] < keep_prob;  // kept with probability 1 - p
        pm[i] = keep;
        py[i] = keep ? px[i] * scale : T(0);
      }
    });
  });
  return Stack{Value(y), Value(mask)};
}

std::vector<TensorMeta> native_dropout_backward_meta(const OpArgs& a) {
  const Tensor& g = a.tensor("grad_output");
  const Tensor& mask = a.tensor("mask");
  QFLOW_CHECK(g.sizes() == mask.sizes(), "native_dropout_backward: grad_output has shape {} but mask has shape {}",
              g.sizes(), mask.sizes());
  QFLOW_CHECK(mask.dtype() == DType::Bool, "native_dropout_backward: mask must be bool, got {}", mask.dtype());
  QFLOW_CHECK(is_floating(g.dtype()), "native_dropout_backward: expected a floating point grad_output, got {}", g.dtype());
  return one(g.sizes(), g.dtype());
}

// dx = dy * mask * scale; dy and mask of any layout.
Stack native_dropout_backward_kernel(OpArgs& a) {
  native_dropout_backward_meta(a);
  const Tensor& g = a.tensor("grad_output");
  const Tensor& mask = a.tensor("mask");
  Tensor dx = new_tensor(g.sizes(), g.dtype());
  visit_floating(g.dtype(), "native_dropout_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T scale = static_cast<T>(a.to_double("scale"));
    binary_loop<T, T, bool>(dx, g, g.strides(), mask, mask.strides(), [scale](T v, bool m) { return m ? v * scale : T(0); });
  });
  return out(dx);
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, bool train) {
  QFLOW_OP_HANDLE("native_dropout");
  Stack s = call(op, {{"input", input}, {"p", p}, {"train", train}});
  return {std::move(s.at(0).tensor()), std::move(s.at(1).tensor())};
}

Tensor dropout(const Tensor& input, double p, bool train) { return std::get<0>(native_dropout(input, p, train)); }

}  // namespace qflow

// The registration and typed functions of core/ops/dropout.toml (Note [One declaration per op]).
#include "core/ops/dropout.inc"
