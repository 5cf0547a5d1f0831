// Derivatives of core/kernels/memory/random.cpp: a fresh random draw carries no history, even when
// it is shaped like a tensor that requires grad (rand_like, randn_like).
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {

QFLOW_REGISTER_DERIVATIVES(random) {
  registry.non_differentiable({"rand", "randn", "randint", "randperm", "rand_like", "randn_like"},
                              "a fresh random draw does not depend on any input's values");
}

}  // namespace qflow::autograd
