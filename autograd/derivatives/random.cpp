// Derivatives of core/kernels/memory/random.cpp: a fresh random draw carries no history, even when
// it is shaped like a tensor that requires grad (rand_like, randn_like).
#include "qflow/autograd/derivatives.h"

namespace qflow::autograd {
namespace {

// Why the draws (core/ops/random.toml) have no derivative.
constexpr std::string_view kFreshDraw = "a fresh random draw does not depend on any input's values";

}  // namespace
}  // namespace qflow::autograd

#include "autograd/derivatives/random.derivatives.inc"
