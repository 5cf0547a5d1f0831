#pragma once
// nn::functional (alias qflow::F): the stateless form of every layer. Each function is the
// registered core op of the same name (one road to a kernel; see ARCHITECTURE.md §2), plus the few
// compositions PyTorch's functional API offers (linear, "same" padding).
#include <optional>
#include <string>

#include "qflow/core/conv_ops.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow::nn::functional {

using qflow::adaptive_avg_pool2d;
using qflow::avg_pool2d;
using qflow::batch_norm;
using qflow::cross_entropy;
using qflow::dropout;
using qflow::flatten;
using qflow::hardsigmoid;
using qflow::hardswish;
using qflow::l1_loss;
using qflow::log_softmax;
using qflow::max_pool2d;
using qflow::mse_loss;
using qflow::nll_loss;
using qflow::Reduction;
using qflow::relu;
using qflow::relu6;
using qflow::sigmoid;
using qflow::silu;
using qflow::softmax;
using qflow::tanh;

/// y = x·Wᵀ + b for x (..., in), W (out, in), b (out).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

/// Spatial padding of a convolution: explicit (h, w) or "same"/"valid" like PyTorch.
struct Conv2dPadding {
  Conv2dPadding(int64_t p = 0) : h(p), w(p) {}  // NOLINT: `.padding = 1`
  Conv2dPadding(int64_t ph, int64_t pw) : h(ph), w(pw) {}
  template <size_t N>
  Conv2dPadding(const char (&mode)[N]) : Conv2dPadding(std::string(mode)) {}  // NOLINT: `.padding = "same"`
  Conv2dPadding(const std::string& mode);  // NOLINT
  int64_t h = 0, w = 0;
  bool same = false;
  bool valid = false;  // "valid" is zero padding, but printed by name like PyTorch does
};

/// conv2d with "same" support: output spatial size equals input size (stride must be 1).
/// Even kernels pad one more on the bottom/right, exactly as PyTorch does.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride, Conv2dPadding padding,
              IntList dilation, int64_t groups);

}  // namespace qflow::nn::functional

namespace qflow {
namespace F = nn::functional;
}
