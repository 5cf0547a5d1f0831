// Optimizer updates (core/kernels/nn/optim.cpp) are not part of any graph.
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

}  // namespace qflow::autograd

#include "autograd/derivatives/optim.derivatives.inc"
