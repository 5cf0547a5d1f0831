#pragma once
// The functional API of core ops. Each function is a thin typed call into the op registry
// (see Note [Op registration]); the registered name is given where it differs. The declared
// families' functions (element-wise arithmetic, comparisons, unary math, reductions) come from
// core/ops/*.toml through the generated headers below (Note [One declaration per op]); the
// rest are written here.
#include <optional>
#include <tuple>

#include "qflow/core/tensor.h"
#include "qflow/core/ops/copy.h"
#include "qflow/core/ops/shape.h"
#include "qflow/core/ops/arithmetic.h"
#include "qflow/core/ops/binary_math.h"
#include "qflow/core/ops/clamp.h"
#include "qflow/core/ops/compare.h"
#include "qflow/core/ops/index.h"
#include "qflow/core/ops/linalg.h"
#include "qflow/core/ops/reduce.h"
#include "qflow/core/ops/reduce_minmax.h"
#include "qflow/core/ops/unary.h"

namespace qflow {

// ---- reductions (dims empty = all) ----------------------------------------------------------
/// Sums `x` down to `sizes` (the inverse of broadcasting; used by gradients).
Tensor sum_to(const Tensor& x, const IntList& sizes);

// ---- shape and views -------------------------------------------------------------------------
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1);
Tensor to_dtype(const Tensor& x, DType dtype);  // "to"
/// x on `device` (x itself when already there); see Note [Devices].
Tensor to_device(const Tensor& x, Device device);


// ---- optimizer updates (core/kernels/nn/optim.cpp) ----------------------------------------------
/// torch.optim.SGD's update of every params[i] from grads[i] in place (momentum_buffers[i] too,
/// which first_step sets to the gradient): one call, one launch on a GPU.
void sgd_update_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers, double lr,
                 double momentum = 0, double dampening = 0, double weight_decay = 0, bool nesterov = false,
                 bool first_step = false);

}  // namespace qflow
