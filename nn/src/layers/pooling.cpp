#include "qflow/nn/layers/pooling.h"

#include "qflow/nn/functional.h"

namespace qflow::nn {

namespace {
// PyTorch prints a square size as one number and a rectangle as a tuple.
std::string size_repr(const Size2& s) { return s.h == s.w ? fmt::format("{}", s.h) : fmt::format("({}, {})", s.h, s.w); }
}  // namespace

Tensor MaxPool2d::forward(const Tensor& x) {
  const auto& o = options_;
  return functional::max_pool2d(x, o.kernel.list(), o.stride.value_or(o.kernel).list(), o.padding.list(), o.dilation.list(),
                                o.ceil_mode);
}
std::string MaxPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", size_repr(o.kernel),
                     size_repr(o.stride.value_or(o.kernel)), size_repr(o.padding), size_repr(o.dilation),
                     o.ceil_mode ? "True" : "False");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  const auto& o = options_;
  return functional::avg_pool2d(x, o.kernel.list(), o.stride.value_or(o.kernel).list(), o.padding.list(), o.ceil_mode,
                                o.count_include_pad);
}
std::string AvgPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}", size_repr(o.kernel), size_repr(o.stride.value_or(o.kernel)),
                     size_repr(o.padding));
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, options_.output.list()); }
std::string AdaptiveAvgPool2d::extra_repr() const {
  return fmt::format("output_size=({}, {})", options_.output.h, options_.output.w);
}

}  // namespace qflow::nn
