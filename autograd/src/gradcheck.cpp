// gradcheck: analytical vector-Jacobian products against central finite differences.
#include "qflow/autograd/gradcheck.h"

#include <cmath>

#include "qflow/autograd/engine.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::autograd {

namespace {

// Reads/writes element `i` (row-major) of a float64 tensor of any layout.
double* element(const Tensor& t, int64_t i) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t size = t.sizes()[d];
    off += (i % size) * t.strides()[d];
    i /= size;
  }
  return t.data_ptr<double>() + off;
}

Tensor evaluate(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to(DType::Float64).contiguous();
}

}  // namespace

bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, const GradcheckOptions& opt) {
  std::vector<size_t> checked;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined() || !inputs[k].requires_grad()) continue;
    QFLOW_CHECK(inputs[k].dtype() == DType::Float64, "gradcheck: input {} should be float64 for precise finite differences, got {}",
                k, inputs[k].dtype());
    checked.push_back(k);
  }
  QFLOW_CHECK(!checked.empty(), "gradcheck: no input requires grad");

  const Tensor out = fn(inputs);
  QFLOW_CHECK(out.requires_grad(), "gradcheck: the output does not require grad (is the op differentiable?)");
  const int64_t n_out = out.numel();
  TensorList wrt;
  for (size_t k : checked) wrt.push_back(inputs[k]);

  // Analytical Jacobian, one row per output element (vector-Jacobian products).
  std::vector<TensorList> analytical(static_cast<size_t>(n_out));
  for (int64_t j = 0; j < n_out; ++j) {
    Tensor seed = zeros(out.sizes(), out.dtype());
    Tensor flat = seed.view({-1});
    flat.narrow(0, j, 1).fill_(1.0);
    analytical[j] = grad({out}, wrt, {seed}, /*retain_graph=*/true, /*allow_unused=*/true);
  }

  // Numerical Jacobian column by column, perturbing the inputs' own storage.
  for (size_t c = 0; c < checked.size(); ++c) {
    const Tensor& x = inputs[checked[c]];
    for (int64_t i = 0; i < x.numel(); ++i) {
      double* p = element(x, i);
      const double orig = *p;
      *p = orig + opt.eps;
      const Tensor plus = evaluate(fn, inputs);
      *p = orig - opt.eps;
      const Tensor minus = evaluate(fn, inputs);
      *p = orig;
      const double* pp = plus.data_ptr<double>();
      const double* pm = minus.data_ptr<double>();
      for (int64_t j = 0; j < n_out; ++j) {
        const double numerical = (pp[j] - pm[j]) / (2 * opt.eps);
        const Tensor& g = analytical[j][c];
        double a = 0.0;
        if (g.defined()) a = *element(g.to(DType::Float64).contiguous(), i);
        QFLOW_CHECK(std::abs(a - numerical) <= opt.atol + opt.rtol * std::abs(numerical),
                    "gradcheck: Jacobian mismatch for input {} at element {} (output element {}): analytical {} vs "
                    "numerical {}",
                    checked[c], i, j, a, numerical);
      }
    }
  }
  return true;
}

}  // namespace qflow::autograd
