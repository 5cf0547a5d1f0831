// Optimizer updates (core/kernels/nn/optim.cpp) are not part of any graph.
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

QFLOW_REGISTER_DERIVATIVES(optim) {
  registry.no_derivative({"sgd_update_"},
                         "an optimizer update writes parameters in place; run it under NoGradGuard, as "
                         "Optimizer::step does");
}

}  // namespace qflow::autograd
