// Converters of registered ops (call_function nodes) to ONNX operators, opset 13 and up.
// Each one either reproduces the op exactly (up to float rounding) or refuses the node.
#include <fmt/format.h>

#include "converter.h"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"

namespace qflow::onnx::detail {
namespace {

using fx::Arguments;
using fx::Node;

double scalar_arg(const Node& n, const fx::Argument& a, std::string_view what) {
  QFLOW_ONNX_CHECK(a.is_int() || a.is_double() || a.is_bool(), n, "argument '{}' must be a number, got {}", what,
                   fx::format_argument(a));
  return a.is_bool() ? (a.to_bool() ? 1.0 : 0.0) : a.to_double();
}

/// A 0-d constant of `like`'s dtype (ONNX's element-wise ops want equal element types).
std::string constant_like(ExportContext& c, const Node& n, std::string_view suffix, double value) {
  return c.builder.scalar(ExportContext::tmp(n, suffix), value, c.dtype(n));
}

void unary(ExportContext& c, const Node& n, const Arguments& a, std::string_view op) {
  c.emit(n, op, {c.tensor_arg(n, a[0], "self")});
}

void clip(ExportContext& c, const Node& n, const Arguments& a, std::optional<double> lo, std::optional<double> hi) {
  std::vector<std::string> inputs{c.tensor_arg(n, a[0], "self")};
  inputs.push_back(lo ? constant_like(c, n, "min", *lo) : "");
  if (hi) inputs.push_back(constant_like(c, n, "max", *hi));
  c.emit(n, "Clip", inputs);
}

void hardswish(ExportContext& c, const Node& n, const Arguments& a) {
  const std::string x = c.tensor_arg(n, a[0], "self");
  if (c.options.opset >= 14) return c.emit(n, "HardSwish", {x});
  // HardSwish arrived in opset 14; before it, x * HardSigmoid(x) with alpha 1/6, beta 1/2
  // is the same function: x * clamp(x/6 + 1/2, 0, 1) = x * relu6(x + 3) / 6.
  const std::string gate = ExportContext::tmp(n, "hardsigmoid");
  c.builder.node("HardSigmoid", {x}, {gate}, {Attr("alpha", 1.0f / 6.0f), Attr("beta", 0.5f)});
  c.emit(n, "Mul", {x, gate});
}

/// add/sub(self, other, alpha): self ± alpha·other.
void add_sub(ExportContext& c, const Node& n, const Arguments& a, std::string_view op) {
  const std::string x = c.tensor_arg(n, a[0], "self");
  std::string y = c.tensor_arg(n, a[1], "other");
  const double alpha = scalar_arg(n, a[2], "alpha");
  if (alpha != 1.0) {
    const std::string scaled = ExportContext::tmp(n, "scaled");
    c.builder.node("Mul", {y, constant_like(c, n, "alpha", alpha)}, {scaled});
    y = scaled;
  }
  c.emit(n, op, {x, y});
}

void binary_scalar(ExportContext& c, const Node& n, const Arguments& a, std::string_view op) {
  c.emit(n, op, {c.tensor_arg(n, a[0], "self"), constant_like(c, n, "other", scalar_arg(n, a[1], "other"))});
}

std::vector<int64_t> pads_of(const std::vector<int64_t>& p) { return {p[0], p[1], p[0], p[1]}; }

/// ONNX's pooled size with ceil_mode; PyTorch drops a last window that starts in the padding.
int64_t onnx_ceil_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return (span + stride - 1) / stride + 1;
}

void max_pool2d(ExportContext& c, const Node& n, const Arguments& a) {
  const auto k = pair_arg(n, a[1], "kernel_size");
  const auto s = pair_arg(n, a[2], "stride", k);
  const auto p = pair_arg(n, a[3], "padding");
  const auto d = pair_arg(n, a[4], "dilation");
  const bool ceil_mode = a[5].to_bool();
  if (ceil_mode) {
    const auto& in = c.shape(*a[0].node());
    const auto& out = c.shape(n);
    for (size_t i = 0; i < 2; ++i)
      QFLOW_ONNX_CHECK(onnx_ceil_size(in[2 + i], k[i], p[i], s[i], d[i]) == out[2 + i], n,
                       "ceil_mode gives {} outputs along dim {} in qflow (PyTorch's rule drops a window starting in "
                       "the padding) but {} in ONNX",
                       out[2 + i], 2 + i, onnx_ceil_size(in[2 + i], k[i], p[i], s[i], d[i]));
  }
  c.emit(n, "MaxPool", {c.tensor_arg(n, a[0], "self")},
         {Attr("kernel_shape", k), Attr("strides", s), Attr("pads", pads_of(p)), Attr("dilations", d),
          Attr("ceil_mode", ceil_mode ? 1 : 0)});
}

void avg_pool2d(ExportContext& c, const Node& n, const Arguments& a) {
  const auto k = pair_arg(n, a[1], "kernel_size");
  const auto s = pair_arg(n, a[2], "stride", k);
  const auto p = pair_arg(n, a[3], "padding");
  // With ceil_mode the divisor of a window hanging over the edge differs between PyTorch's
  // rule and ONNX Runtime's, so such a node cannot be exported faithfully.
  QFLOW_ONNX_CHECK(!a[4].to_bool(), n, "avg_pool2d with ceil_mode=True has no exact ONNX AveragePool equivalent");
  QFLOW_ONNX_CHECK(a[6].is_none(), n, "avg_pool2d with divisor_override={} has no ONNX equivalent",
                   fx::format_argument(a[6]));
  c.emit(n, "AveragePool", {c.tensor_arg(n, a[0], "self")},
         {Attr("kernel_shape", k), Attr("strides", s), Attr("pads", pads_of(p)),
          Attr("count_include_pad", a[5].to_bool() ? 1 : 0)});
}

void adaptive_avg_pool2d(ExportContext& c, const Node& n, const Arguments& a) {
  const std::string x = c.tensor_arg(n, a[0], "self");
  const auto out = pair_arg(n, a[1], "output_size");
  const auto& in = c.shape(*a[0].node());
  if (out[0] == 1 && out[1] == 1) return c.emit(n, "GlobalAveragePool", {x});
  // Equal windows exist only when the output size divides the input size.
  QFLOW_ONNX_CHECK(in[2] % out[0] == 0 && in[3] % out[1] == 0, n,
                   "adaptive_avg_pool2d from {}x{} to {}x{} uses windows of different sizes, which ONNX's "
                   "AveragePool cannot express",
                   in[2], in[3], out[0], out[1]);
  const std::vector<int64_t> k{in[2] / out[0], in[3] / out[1]};
  c.emit(n, "AveragePool", {x}, {Attr("kernel_shape", k), Attr("strides", k)});
}

void mean(ExportContext& c, const Node& n, const Arguments& a) {
  std::vector<Attr> attrs{Attr("keepdims", a[2].to_bool() ? 1 : 0)};
  std::vector<int64_t> dims;
  QFLOW_ONNX_CHECK(a[1].is_int_list(), n, "argument 'dim' must be int[], got {}", fx::format_argument(a[1]));
  for (const fx::IntOrNode& e : a[1].int_list()) {
    QFLOW_ONNX_CHECK(std::holds_alternative<int64_t>(e), n, "argument 'dim' must be constant");
    dims.push_back(std::get<int64_t>(e));
  }
  if (!dims.empty()) attrs.emplace_back("axes", dims);  // empty: every axis, ONNX's default too
  c.emit(n, "ReduceMean", {c.tensor_arg(n, a[0], "self")}, attrs);
}

/// view/reshape(self, sizes). A size read from the input itself (`x.size(i)` at position i)
/// becomes ONNX's 0 ("copy this dimension"), so the batch dimension stays symbolic;
/// `view(x.size(0), -1)` is ONNX's Flatten.
void reshape(ExportContext& c, const Node& n, const Arguments& a) {
  const Node& self = *a[0].node();
  const std::string x = c.tensor_arg(n, a[0], "self");
  std::vector<int64_t> shape;
  const auto& sizes = a[1].int_list();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (const auto* v = std::get_if<int64_t>(&sizes[i])) {
      QFLOW_ONNX_CHECK(*v != 0, n, "a size of 0 would mean 'copy' in ONNX's Reshape");
      shape.push_back(*v);
      continue;
    }
    const Node* s = std::get<Node*>(sizes[i]);
    const bool own_dim = s->target() == "sym_size" && s->args().size() == 2 && s->args()[0].is_node() &&
                         s->args()[0].node() == &self && s->args()[1].to_int() == static_cast<int64_t>(i);
    QFLOW_ONNX_CHECK(own_dim, n,
                     "size {} is computed by %{}; ONNX export supports symbolic sizes only as the input's own size "
                     "at the same position (x.size({}))",
                     i, s->name(), i);
    shape.push_back(0);
  }
  if (shape.size() == 2 && shape[0] == 0 && shape[1] == -1) return c.emit(n, "Flatten", {x}, {Attr("axis", 1)});
  c.emit(n, "Reshape", {x, c.builder.int64s(ExportContext::tmp(n, "shape"), shape)});
}

void flatten(ExportContext& c, const Node& n, const Arguments& a) {
  const auto& in = c.shape(*a[0].node());
  const auto rank = static_cast<int64_t>(in.size());
  int64_t start = a[1].to_int(), end = a[2].to_int();
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  const std::string x = c.tensor_arg(n, a[0], "self");
  if (start == 1 && end == rank - 1) return c.emit(n, "Flatten", {x}, {Attr("axis", 1)});
  // Leading dims copied (0), the flattened run as -1, trailing dims by their fixed size.
  std::vector<int64_t> shape(static_cast<size_t>(start), 0);
  shape.push_back(-1);
  for (int64_t i = end + 1; i < rank; ++i) shape.push_back(in[static_cast<size_t>(i)]);
  c.emit(n, "Reshape", {x, c.builder.int64s(ExportContext::tmp(n, "shape"), shape)});
}

void transpose_2d(ExportContext& c, const Node& n, const Arguments& a) {
  if (c.shape(*a[0].node()).size() < 2) return c.alias(n, a[0]);
  c.emit(n, "Transpose", {c.tensor_arg(n, a[0], "self")}, {Attr("perm", std::vector<int64_t>{1, 0})});
}

void addmm(ExportContext& c, const Node& n, const Arguments& a) {
  c.emit(n, "Gemm", {c.tensor_arg(n, a[1], "mat1"), c.tensor_arg(n, a[2], "mat2"), c.tensor_arg(n, a[0], "self")},
         {Attr("beta", static_cast<float>(scalar_arg(n, a[3], "beta"))),
          Attr("alpha", static_cast<float>(scalar_arg(n, a[4], "alpha")))});
}

void cat(ExportContext& c, const Node& n, const Arguments& a) {
  QFLOW_ONNX_CHECK(a[0].is_node_list(), n, "cat: expected a list of tensors, got {}", fx::format_argument(a[0]));
  std::vector<std::string> inputs;
  for (const Node* t : a[0].node_list()) inputs.push_back(c.value(*t, n));
  c.emit(n, "Concat", inputs, {Attr("axis", a[1].to_int())});
}

void native_dropout(ExportContext& c, const Node& n, const Arguments& a) {
  QFLOW_ONNX_CHECK(!a[2].to_bool(), n, "dropout in training mode is random; export the model in eval mode");
  // Eval dropout is the identity; its keep-mask output has no ONNX value.
  c.bind(n, {c.tensor_arg(n, a[0], "input"), ""});
}

void batch_norm(ExportContext& c, const Node& n, const Arguments& a) {
  QFLOW_ONNX_CHECK(!a[5].to_bool(), n, "batch_norm with training=True normalises with batch statistics; ONNX's "
                                       "BatchNormalization uses running statistics (export in eval mode)");
  QFLOW_ONNX_CHECK(!a[3].is_none() && !a[4].is_none(), n, "batch_norm without running statistics");
  const auto channels = c.shape(*a[0].node()).at(1);
  const DType dt = c.dtype(n);
  auto affine = [&](const fx::Argument& arg, std::string_view name, double fill) {
    if (!arg.is_none()) return c.tensor_arg(n, arg, name);
    return c.builder.initializer(ExportContext::tmp(n, name), full({channels}, fill, dt));
  };
  c.emit(n, "BatchNormalization",
         {c.tensor_arg(n, a[0], "input"), affine(a[1], "weight", 1.0), affine(a[2], "bias", 0.0),
          c.tensor_arg(n, a[3], "running_mean"), c.tensor_arg(n, a[4], "running_var")},
         {Attr("epsilon", static_cast<float>(a[7].to_double())), Attr("momentum", static_cast<float>(1.0 - a[6].to_double()))});
}

void conv2d(ExportContext& c, const Node& n, const Arguments& a) {
  const auto& w = c.shape(*a[1].node());
  QFLOW_ONNX_CHECK(w.size() == 4, n, "conv2d weight must be 4-d, got shape [{}]", fmt::join(w, ", "));
  std::vector<std::string> inputs{c.tensor_arg(n, a[0], "input"), c.tensor_arg(n, a[1], "weight")};
  if (!a[2].is_none()) inputs.push_back(c.tensor_arg(n, a[2], "bias"));
  c.emit(n, "Conv", inputs,
         {Attr("kernel_shape", std::vector<int64_t>{w[2], w[3]}), Attr("strides", pair_arg(n, a[3], "stride")),
          Attr("pads", pads_of(pair_arg(n, a[4], "padding"))), Attr("dilations", pair_arg(n, a[5], "dilation")),
          Attr("group", a[6].to_int())});
}

}  // namespace

void add_float_function_converters(std::map<std::string, FunctionConverter>& t) {
  auto u = [](std::string_view op) {
    return [op](ExportContext& c, const Node& n, const Arguments& a) { unary(c, n, a, op); };
  };
  t["relu"] = u("Relu");
  t["sigmoid"] = u("Sigmoid");
  t["tanh"] = u("Tanh");
  t["relu6"] = [](ExportContext& c, const Node& n, const Arguments& a) { clip(c, n, a, 0.0, 6.0); };
  t["hardtanh"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    clip(c, n, a, scalar_arg(n, a[1], "min_val"), scalar_arg(n, a[2], "max_val"));
  };
  t["clamp"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    auto opt = [&](const fx::Argument& v, std::string_view what) {
      return v.is_none() ? std::nullopt : std::optional<double>(scalar_arg(n, v, what));
    };
    clip(c, n, a, opt(a[1], "min"), opt(a[2], "max"));
  };
  t["hardswish"] = hardswish;
  t["leaky_relu"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    c.emit(n, "LeakyRelu", {c.tensor_arg(n, a[0], "self")},
           {Attr("alpha", static_cast<float>(scalar_arg(n, a[1], "negative_slope")))});
  };
  t["add"] = [](ExportContext& c, const Node& n, const Arguments& a) { add_sub(c, n, a, "Add"); };
  t["sub"] = [](ExportContext& c, const Node& n, const Arguments& a) { add_sub(c, n, a, "Sub"); };
  t["mul"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    c.emit(n, "Mul", {c.tensor_arg(n, a[0], "self"), c.tensor_arg(n, a[1], "other")});
  };
  t["div"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    QFLOW_ONNX_CHECK(is_floating(c.dtype(n)), n, "integer division rounds differently in ONNX");
    c.emit(n, "Div", {c.tensor_arg(n, a[0], "self"), c.tensor_arg(n, a[1], "other")});
  };
  t["neg"] = u("Neg");
  t["add.Scalar"] = [](ExportContext& c, const Node& n, const Arguments& a) { binary_scalar(c, n, a, "Add"); };
  t["sub.Scalar"] = [](ExportContext& c, const Node& n, const Arguments& a) { binary_scalar(c, n, a, "Sub"); };
  t["mul.Scalar"] = [](ExportContext& c, const Node& n, const Arguments& a) { binary_scalar(c, n, a, "Mul"); };
  t["div.Scalar"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    QFLOW_ONNX_CHECK(is_floating(c.dtype(n)), n, "integer division rounds differently in ONNX");
    binary_scalar(c, n, a, "Div");
  };
  t["max_pool2d"] = max_pool2d;
  t["avg_pool2d"] = avg_pool2d;
  t["adaptive_avg_pool2d"] = adaptive_avg_pool2d;
  t["mean"] = mean;
  t["view"] = reshape;
  t["reshape"] = reshape;
  t["flatten"] = flatten;
  t["t"] = transpose_2d;
  t["addmm"] = addmm;
  t["matmul"] = [](ExportContext& c, const Node& n, const Arguments& a) {
    c.emit(n, "MatMul", {c.tensor_arg(n, a[0], "self"), c.tensor_arg(n, a[1], "other")});
  };
  t["mm"] = t["matmul"];
  t["cat"] = cat;
  t["native_dropout"] = native_dropout;
  t["contiguous"] = [](ExportContext& c, const Node& n, const Arguments& a) { c.alias(n, a[0]); };
  t["batch_norm"] = batch_norm;
  t["conv2d"] = conv2d;
  // A symbolic size has no tensor value; reshape reads it from the graph (see reshape).
  t["sym_size"] = [](ExportContext&, const Node&, const Arguments&) {};
}

}  // namespace qflow::onnx::detail
