// Derivatives of core/kernels/memory/random.cpp: a fresh random draw carries no history, even when
// it is shaped like a tensor that requires grad (rand_like, randn_like).
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

}  // namespace qflow::autograd

#include "autograd/derivatives/random.derivatives.inc"
