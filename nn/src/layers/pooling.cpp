#include "qflow/nn/layers/pooling.h"

#include "qflow/nn/functional.h"

namespace qflow::nn {

Tensor MaxPool2d::forward(const Tensor& x) {
  const auto& o = options_;
  return functional::max_pool2d(x, o.kernel.list(), o.stride.value_or(o.kernel).list(), o.padding.list(), o.dilation.list(),
                                o.ceil_mode);
}
std::string MaxPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", o.kernel.repr(),
                     o.stride.value_or(o.kernel).repr(), o.padding.repr(), o.dilation.repr(),
                     o.ceil_mode ? "True" : "False");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  const auto& o = options_;
  return functional::avg_pool2d(x, o.kernel.list(), o.stride.value_or(o.kernel).list(), o.padding.list(), o.ceil_mode,
                                o.count_include_pad);
}
std::string AvgPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}", o.kernel.repr(), o.stride.value_or(o.kernel).repr(),
                     o.padding.repr());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, options_.output.list()); }
std::string AdaptiveAvgPool2d::extra_repr() const {
  return fmt::format("output_size={}", options_.output.repr());
}

}  // namespace qflow::nn
