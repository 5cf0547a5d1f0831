#include "qflow/nn/functional.h"


namespace qflow::nn::functional {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  QFLOW_CHECK(weight.dim() == 2, "linear: weight must be 2-d (out_features, in_features), got shape {}", weight.sizes());
  QFLOW_CHECK(input.dim() >= 1 && input.sizes().back() == weight.sizes()[1],
              "linear: input of shape {} does not match weight of shape {} (expected last dimension {})", input.sizes(),
              weight.sizes(), weight.sizes()[1]);
  if (input.dim() == 2 && bias.defined()) return addmm(bias, input, weight.t());
  Tensor out = matmul(input, weight.t());
  return bias.defined() ? out + bias : out;
}

Conv2dPadding::Conv2dPadding(const std::string& mode) {
  if (mode == "same") {
    same = true;
  } else {
    QFLOW_CHECK(mode == "valid", "conv2d: padding must be an integer, a pair, \"same\" or \"valid\", got \"{}\"",
                mode);
    valid = true;
  }
}

namespace {
int64_t pick(const IntList& v, size_t i) { return v.size() == 1 ? v[0] : v.at(i); }
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, IntList stride, Conv2dPadding padding,
              IntList dilation, int64_t groups) {
  const std::optional<Tensor> b = bias.defined() ? std::optional<Tensor>(bias) : std::nullopt;
  if (!padding.same) return qflow::conv2d(input, weight, b, stride, {padding.h, padding.w}, dilation, groups);
  QFLOW_CHECK(pick(stride, 0) == 1 && pick(stride, 1) == 1, "conv2d: padding=\"same\" is not supported for strided convolutions (stride {})",
              stride);
  QFLOW_CHECK(weight.dim() == 4, "conv2d: weight must be 4-d, got shape {}", weight.sizes());
  // Total padding per dim is dilation·(k − 1); PyTorch puts the odd extra unit at the end.
  int64_t total[2], lo[2];
  bool asymmetric = false;
  for (size_t i = 0; i < 2; ++i) {
    total[i] = pick(dilation, i) * (weight.sizes()[2 + i] - 1);
    lo[i] = total[i] / 2;
    asymmetric = asymmetric || (total[i] % 2 != 0);
  }
  if (!asymmetric) return qflow::conv2d(input, weight, b, stride, {lo[0], lo[1]}, dilation, groups);
  // Pad both sides with the larger amount: the output gains a leading row/column that
  // corresponds to the extra padding in front; dropping it gives PyTorch's result.
  const int64_t hi[2] = {total[0] - lo[0], total[1] - lo[1]};
  Tensor out = qflow::conv2d(input, weight, b, stride, {hi[0], hi[1]}, dilation, groups);
  for (size_t i = 0; i < 2; ++i)
    if (hi[i] != lo[i]) out = out.narrow(static_cast<int64_t>(2 + i), 1, out.sizes()[2 + i] - 1);
  return out;
}

}  // namespace qflow::nn::functional
