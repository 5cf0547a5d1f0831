#pragma once
// The functional API of core ops. Each function is a thin typed call into the op registry
// (see Note [Op registration]); the registered name is given where it differs.
#include <optional>
#include <tuple>

#include "qflow/core/tensor.h"
#include "qflow/core/ops/reduce.h"
#include "qflow/core/ops/reduce_minmax.h"
#include "qflow/core/ops/clamp.h"
#include "qflow/core/ops/binary_math.h"
#include "qflow/core/ops/arithmetic.h"
#include "qflow/core/ops/compare.h"
#include "qflow/core/ops/unary.h"

namespace qflow {

// ---- element-wise binary (broadcasting, PyTorch type promotion) ------------------------
Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Scalar& other);
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Scalar& other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Scalar& other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Scalar& other);

// ---- comparisons → bool -----------------------------------------------------------------

// ---- element-wise unary -------------------------------------------------------------------
Tensor& relu_(Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- reductions (dims empty = all) ----------------------------------------------------------
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Sums `x` down to `sizes` (the inverse of broadcasting; used by gradients).
Tensor sum_to(const Tensor& x, const IntList& sizes);
/// sum_to(self * other, sizes) for self and other of one shape, without writing the product
/// when both are channel-blocked and sizes is per channel (the gradient of a per-channel divisor).
Tensor mul_sum_to(const Tensor& self, const Tensor& other, const IntList& sizes);

// ---- shape and views -------------------------------------------------------------------------
Tensor view(const Tensor& x, const SymIntList& sizes);
Tensor reshape(const Tensor& x, const SymIntList& sizes);
Tensor permute(const Tensor& x, const IntList& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);  // "squeeze.dim"
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const SymIntList& sizes);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to_dtype(const Tensor& x, DType dtype);  // "to"
/// x on `device` (x itself when already there); see Note [Devices].
Tensor to_device(const Tensor& x, Device device);
Tensor cat(const TensorList& tensors, int64_t dim = 0);
Tensor stack(const TensorList& tensors, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// self with self[..., index[j], ...] += alpha * source[..., j, ...] along `dim` (out of place;
/// repeated indices accumulate). The backward of index_select.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
Tensor& copy_(Tensor& self, const Tensor& src);
Tensor& fill_(Tensor& self, const Scalar& value);
Tensor& zero_(Tensor& self);

// ---- linear algebra (OpenBLAS) -------------------------------------------------------------
Tensor mm(const Tensor& a, const Tensor& b);     // (n,k) @ (k,m)
Tensor bmm(const Tensor& a, const Tensor& b);    // (B,n,k) @ (B,k,m)
Tensor matmul(const Tensor& a, const Tensor& b); // NumPy matmul semantics incl. batch broadcast
/// beta * self + alpha * (a @ b); self broadcasts to (n,m).
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);

// ---- optimizer updates (core/kernels/nn/optim.cpp) ----------------------------------------------
/// torch.optim.SGD's update of every params[i] from grads[i] in place (momentum_buffers[i] too,
/// which first_step sets to the gradient): one call, one launch on a GPU.
void sgd_update_(const TensorList& params, const TensorList& grads, const TensorList& momentum_buffers, double lr,
                 double momentum = 0, double dampening = 0, double weight_decay = 0, bool nesterov = false,
                 bool first_step = false);

}  // namespace qflow
