#include "qflow/nn/layers/conv.h"

#include <cmath>

#include "qflow/core/conv_ops.h"
#include "qflow/core/factory.h"
#include "qflow/nn/init.h"

namespace qflow::nn {

std::string Size2::repr() const { return single ? fmt::format("{}", h) : fmt::format("({}, {})", h, w); }

Conv2d::Conv2d(Conv2dOptions options) : options_(options) {
  QFLOW_CHECK(options_.in > 0 && options_.out > 0, "Conv2d: in and out channels must be positive, got in={} out={}",
              options_.in, options_.out);
  QFLOW_CHECK(options_.groups > 0 && options_.in % options_.groups == 0 && options_.out % options_.groups == 0,
              "Conv2d: groups={} must divide in={} and out={}", options_.groups, options_.in, options_.out);
  reset();
}

// Initializes before registering: while clone() rebuilds a copy, register_parameter returns
// the source's values, which must not be overwritten (see Note [Module cloning]).
void Conv2d::reset() {
  const auto& o = options_;
  Tensor w = empty({o.out, o.in / o.groups, o.kernel.h, o.kernel.w});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(w).first));
  weight = register_parameter("weight", w);
  if (o.bias) {
    Tensor b = empty({o.out});
    init::uniform_(b, -bound, bound);
    bias = register_parameter("bias", b);
  } else {
    bias = Tensor();
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  const auto& o = options_;
  return functional::conv2d(x, weight, bias, o.stride.list(), o.padding, o.dilation.list(), o.groups);
}

namespace {
// PyTorch's Conv2d.extra_repr.
std::string conv2d_repr(const Conv2dOptions& o) {
  std::string s = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", o.in, o.out, o.kernel.h, o.kernel.w,
                              o.stride.h, o.stride.w);
  if (o.padding.same) s += ", padding=same";
  else if (o.padding.valid) s += ", padding=valid";
  else if (o.padding.h != 0 || o.padding.w != 0) s += fmt::format(", padding=({}, {})", o.padding.h, o.padding.w);
  if (!(o.dilation == Size2(1))) s += fmt::format(", dilation=({}, {})", o.dilation.h, o.dilation.w);
  if (o.groups != 1) s += fmt::format(", groups={}", o.groups);
  if (!o.bias) s += ", bias=False";
  return s;
}
}  // namespace

std::string Conv2d::extra_repr() const { return conv2d_repr(options_); }

ModulePtr Conv2d::fused_with_relu() const {
  return options_.padding.same ? nullptr : std::make_shared<ConvReLU2d>(*this);
}

ConvReLU2d::ConvReLU2d(const Conv2d& conv) : weight(conv.weight), bias(conv.bias), options_(conv.options()) {
  QFLOW_CHECK(!options_.padding.same, "ConvReLU2d: padding=\"same\" is not supported (it pads unevenly for even kernels)");
  reset();
  train(conv.is_training());
}

void ConvReLU2d::reset() {
  weight = register_parameter("weight", weight, weight.requires_grad());
  if (bias.defined()) bias = register_parameter("bias", bias, bias.requires_grad());
}

Tensor ConvReLU2d::forward(const Tensor& x) {
  const auto& o = options_;
  return conv2d_relu(x, weight, bias, o.stride.list(), {o.padding.h, o.padding.w}, o.dilation.list(), o.groups);
}

std::string ConvReLU2d::extra_repr() const { return conv2d_repr(options_); }

}  // namespace qflow::nn
