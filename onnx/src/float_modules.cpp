// Converters of the built-in layers with parameters: their weights become initializers named
// by their state_dict keys ("layer1.0.conv1.weight").
#include <fmt/format.h>

#include "converter.h"
#include "qflow/core/factory.h"
#include "qflow/nn/layers/batchnorm.h"
#include "qflow/nn/layers/conv.h"
#include "qflow/nn/layers/linear.h"

namespace qflow::onnx::detail {

namespace {

std::string param(ExportContext& c, const fx::Node& n, std::string_view name, const Tensor& t) {
  return c.builder.initializer(fmt::format("{}.{}", n.target(), name), t);
}

void conv2d_module(ExportContext& c, const fx::Node& n, nn::Module& m) {
  auto& conv = static_cast<nn::Conv2d&>(m);
  std::vector<std::string> inputs{module_input(c, n), param(c, n, "weight", conv.weight)};
  if (conv.bias.defined()) inputs.push_back(param(c, n, "bias", conv.bias));
  c.emit(n, "Conv", inputs, conv_attrs(n, conv.options(), conv.weight.sizes()));
}

void linear_module(ExportContext& c, const fx::Node& n, nn::Module& m) {
  auto& lin = static_cast<nn::Linear&>(m);
  const std::string x = module_input(c, n);
  const std::string w = param(c, n, "weight", lin.weight);
  if (c.shape(*n.args()[0].node()).size() == 2) {
    // Gemm reads the (out, in) weight as stored, transposed by transB: y = x·Wᵀ + b.
    std::vector<std::string> inputs{x, w};
    if (lin.bias.defined()) inputs.push_back(param(c, n, "bias", lin.bias));
    return c.emit(n, "Gemm", inputs, {Attr("transB", 1)});
  }
  // Other ranks: MatMul broadcasts over the leading dimensions.
  const std::string wt = ExportContext::tmp(n, "weight_t"), y = ExportContext::tmp(n, "matmul");
  c.builder.node("Transpose", {w}, {wt}, {Attr("perm", std::vector<int64_t>{1, 0})});
  if (!lin.bias.defined()) return c.emit(n, "MatMul", {x, wt});
  c.builder.node("MatMul", {x, wt}, {y});
  c.emit(n, "Add", {y, param(c, n, "bias", lin.bias)});
}

template <class BN>
void batch_norm_module(ExportContext& c, const fx::Node& n, nn::Module& m) {
  auto& bn = static_cast<BN&>(m);
  QFLOW_ONNX_CHECK(bn.running_mean.defined() && bn.running_var.defined(), n,
                   "{} without running statistics (track_running_stats=False) normalises with batch statistics, "
                   "which ONNX's BatchNormalization cannot express",
                   m.type_name());
  const auto& o = bn.options();
  const DType dt = bn.running_mean.dtype();
  const std::string scale = bn.weight.defined() ? param(c, n, "weight", bn.weight)
                                                : c.builder.initializer(ExportContext::tmp(n, "weight"), ones({o.features}, dt));
  const std::string shift = bn.bias.defined() ? param(c, n, "bias", bn.bias)
                                              : c.builder.initializer(ExportContext::tmp(n, "bias"), zeros({o.features}, dt));
  // ONNX's momentum weighs the old running value; PyTorch's the new batch statistic.
  const float momentum = static_cast<float>(1.0 - o.momentum.value_or(0.1));
  c.emit(n, "BatchNormalization",
         {module_input(c, n), scale, shift, param(c, n, "running_mean", bn.running_mean),
          param(c, n, "running_var", bn.running_var)},
         {Attr("epsilon", static_cast<float>(o.eps)), Attr("momentum", momentum)});
}

}  // namespace

std::string module_input(ExportContext& c, const fx::Node& n) {
  QFLOW_ONNX_CHECK(n.args().size() == 1 && n.kwargs().empty(), n, "expected one tensor argument, got {}",
                   fx::format_arguments(n.args()));
  return c.tensor_arg(n, n.args()[0], "input");
}

std::vector<Attr> conv_attrs(const fx::Node& n, const nn::Conv2dOptions& o, const std::vector<int64_t>& weight_shape) {
  QFLOW_ONNX_CHECK(weight_shape.size() == 4, n, "conv weight must be 4-d, got shape [{}]", fmt::join(weight_shape, ", "));
  const std::vector<int64_t> k{weight_shape[2], weight_shape[3]};
  const std::vector<int64_t> dil{o.dilation.h, o.dilation.w};
  std::vector<int64_t> pads{o.padding.h, o.padding.w, o.padding.h, o.padding.w};
  if (o.padding.same) {
    // PyTorch's "same": total dilation·(k − 1) per dim, the odd unit at the end.
    for (size_t i = 0; i < 2; ++i) {
      const int64_t total = dil[i] * (k[i] - 1);
      pads[i] = total / 2;
      pads[i + 2] = total - total / 2;
    }
  }
  return {Attr("kernel_shape", k), Attr("strides", std::vector<int64_t>{o.stride.h, o.stride.w}), Attr("pads", pads),
          Attr("dilations", dil), Attr("group", o.groups)};
}

void add_float_module_converters(std::unordered_map<std::type_index, ModuleConverter>& t) {
  t[typeid(nn::Conv2d)] = conv2d_module;
  t[typeid(nn::Linear)] = linear_module;
  t[typeid(nn::BatchNorm1d)] = batch_norm_module<nn::BatchNorm1d>;
  t[typeid(nn::BatchNorm2d)] = batch_norm_module<nn::BatchNorm2d>;
}

}  // namespace qflow::onnx::detail
