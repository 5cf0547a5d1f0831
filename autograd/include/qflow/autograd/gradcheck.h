#pragma once
// Finite-difference check of analytical gradients, in float64 (like torch.autograd.gradcheck).
#include <functional>

#include "qflow/core/tensor.h"

namespace qflow::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

/// `fn` maps inputs to one output tensor. Inputs that require grad are checked; they should
/// be float64. Returns true, or throws qflow::Error describing the first mismatch
/// (input, element, analytical vs numerical value).
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               const GradcheckOptions& options = {});

}  // namespace qflow::autograd

namespace qflow {
using autograd::gradcheck;
}
