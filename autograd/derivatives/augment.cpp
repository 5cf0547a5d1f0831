// Derivatives of core/kernels/memory/augment.cpp: none (Note [Augmentation on the device]).
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

}  // namespace qflow::autograd

#include "autograd/derivatives/augment.derivatives.inc"
