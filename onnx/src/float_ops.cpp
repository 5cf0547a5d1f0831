// Converters of registered ops (call_function nodes) to ONNX operators, opset 13 and up.
// Each one either reproduces the op exactly (up to float rounding) or refuses the node.
#include <fmt/format.h>

#include "converter.h"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"

namespace qflow::onnx::detail {
namespace {

using fx::Node;

/// A 0-d constant of `like`'s dtype (ONNX's element-wise ops want equal element types).
std::string constant_like(ExportContext& c, const Node& n, std::string_view suffix, double value) {
  return c.builder.scalar(ExportContext::tmp(n, suffix), value, c.dtype(n));
}

void unary(ExportContext& c, const Node& n, const NodeArgs& a, std::string_view op) {
  c.emit(n, op, {c.input(a, "self")});
}

void clip(ExportContext& c, const Node& n, const NodeArgs& a, std::optional<double> lo, std::optional<double> hi) {
  std::vector<std::string> inputs{c.input(a, "self")};
  inputs.push_back(lo ? constant_like(c, n, "min", *lo) : "");
  if (hi) inputs.push_back(constant_like(c, n, "max", *hi));
  c.emit(n, "Clip", inputs);
}

void hardswish(ExportContext& c, const Node& n, const NodeArgs& a) {
  const std::string x = c.input(a, "self");
  if (c.options.opset >= 14) return c.emit(n, "HardSwish", {x});
  // HardSwish arrived in opset 14; before it, x * HardSigmoid(x) with alpha 1/6, beta 1/2
  // is the same function: x * clamp(x/6 + 1/2, 0, 1) = x * relu6(x + 3) / 6.
  const std::string gate = ExportContext::tmp(n, "hardsigmoid");
  c.builder.node("HardSigmoid", {x}, {gate}, {Attr("alpha", 1.0f / 6.0f), Attr("beta", 0.5f)});
  c.emit(n, "Mul", {x, gate});
}

// hardsigmoid(x) = relu6(x + 3) / 6 = clamp(x / 6 + 1/2, 0, 1): ONNX's HardSigmoid (opset 6) with
// alpha 1/6 and beta 1/2.
void hardsigmoid(ExportContext& c, const Node& n, const NodeArgs& a) {
  c.emit(n, "HardSigmoid", {c.input(a, "self")}, {Attr("alpha", 1.0f / 6.0f), Attr("beta", 0.5f)});
}

// silu(x) = x * Sigmoid(x): ONNX has no SiLU op in the opsets qflow writes (13-17).
void silu(ExportContext& c, const Node& n, const NodeArgs& a) {
  const std::string x = c.input(a, "self");
  const std::string gate = ExportContext::tmp(n, "sigmoid");
  c.builder.node("Sigmoid", {x}, {gate});
  c.emit(n, "Mul", {x, gate});
}

/// add/sub(self, other, alpha): self ± alpha·other.
void add_sub(ExportContext& c, const Node& n, const NodeArgs& a, std::string_view op) {
  const std::string x = c.input(a, "self");
  std::string y = c.input(a, "other");
  const double alpha = scalar_arg(a, "alpha");
  if (alpha != 1.0) {
    const std::string scaled = ExportContext::tmp(n, "scaled");
    c.builder.node("Mul", {y, constant_like(c, n, "alpha", alpha)}, {scaled});
    y = scaled;
  }
  c.emit(n, op, {x, y});
}

/// op(self, other) of two tensors.
void binary(ExportContext& c, const Node& n, const NodeArgs& a, std::string_view op) {
  c.emit(n, op, {c.input(a, "self"), c.input(a, "other")});
}

void binary_scalar(ExportContext& c, const Node& n, const NodeArgs& a, std::string_view op) {
  c.emit(n, op, {c.input(a, "self"), constant_like(c, n, "other", scalar_arg(a, "other"))});
}

std::vector<int64_t> pads_of(const std::vector<int64_t>& p) { return {p[0], p[1], p[0], p[1]}; }

/// ONNX's pooled size with ceil_mode; PyTorch drops a last window that starts in the padding.
int64_t onnx_ceil_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return (span + stride - 1) / stride + 1;
}

void max_pool2d(ExportContext& c, const Node& n, const NodeArgs& a) {
  const auto k = pair_arg(a, "kernel_size");
  const auto s = pair_arg(a, "stride", k);
  const auto p = pair_arg(a, "padding");
  const auto d = pair_arg(a, "dilation");
  const bool ceil_mode = a["ceil_mode"].to_bool();
  if (ceil_mode) {
    const auto& in = c.shape(a.producer("self"));
    const auto& out = c.shape(n);
    for (size_t i = 0; i < 2; ++i)
      QFLOW_ONNX_CHECK(onnx_ceil_size(in[2 + i], k[i], p[i], s[i], d[i]) == out[2 + i], n,
                       "ceil_mode gives {} outputs along dim {} in qflow (PyTorch's rule drops a window starting in "
                       "the padding) but {} in ONNX",
                       out[2 + i], 2 + i, onnx_ceil_size(in[2 + i], k[i], p[i], s[i], d[i]));
  }
  c.emit(n, "MaxPool", {c.input(a, "self")},
         {Attr("kernel_shape", k), Attr("strides", s), Attr("pads", pads_of(p)), Attr("dilations", d),
          Attr("ceil_mode", ceil_mode ? 1 : 0)});
}

void avg_pool2d(ExportContext& c, const Node& n, const NodeArgs& a) {
  const auto k = pair_arg(a, "kernel_size");
  const auto s = pair_arg(a, "stride", k);
  const auto p = pair_arg(a, "padding");
  // With ceil_mode the divisor of a window hanging over the edge differs between PyTorch's
  // rule and ONNX Runtime's, so such a node cannot be exported faithfully.
  QFLOW_ONNX_CHECK(!a["ceil_mode"].to_bool(), n, "avg_pool2d with ceil_mode=True has no exact ONNX AveragePool equivalent");
  QFLOW_ONNX_CHECK(a["divisor_override"].is_none(), n, "avg_pool2d with divisor_override={} has no ONNX equivalent",
                   fx::format_argument(a["divisor_override"]));
  c.emit(n, "AveragePool", {c.input(a, "self")},
         {Attr("kernel_shape", k), Attr("strides", s), Attr("pads", pads_of(p)),
          Attr("count_include_pad", a["count_include_pad"].to_bool() ? 1 : 0)});
}

void adaptive_avg_pool2d(ExportContext& c, const Node& n, const NodeArgs& a) {
  const std::string x = c.input(a, "self");
  const auto out = pair_arg(a, "output_size");
  const auto& in = c.shape(a.producer("self"));
  if (out[0] == 1 && out[1] == 1) return c.emit(n, "GlobalAveragePool", {x});
  // Equal windows exist only when the output size divides the input size.
  QFLOW_ONNX_CHECK(in[2] % out[0] == 0 && in[3] % out[1] == 0, n,
                   "adaptive_avg_pool2d from {}x{} to {}x{} uses windows of different sizes, which ONNX's "
                   "AveragePool cannot express",
                   in[2], in[3], out[0], out[1]);
  const std::vector<int64_t> k{in[2] / out[0], in[3] / out[1]};
  c.emit(n, "AveragePool", {x}, {Attr("kernel_shape", k), Attr("strides", k)});
}

void mean(ExportContext& c, const Node& n, const NodeArgs& a) {
  std::vector<Attr> attrs{Attr("keepdims", a["keepdim"].to_bool() ? 1 : 0)};
  std::vector<int64_t> dims;
  const fx::Argument& dim = a["dim"];
  QFLOW_ONNX_CHECK(dim.is_int_list(), n, "argument 'dim' must be int[], got {}", fx::format_argument(dim));
  for (const fx::IntOrNode& e : dim.int_list()) {
    QFLOW_ONNX_CHECK(std::holds_alternative<int64_t>(e), n, "argument 'dim' must be constant");
    dims.push_back(std::get<int64_t>(e));
  }
  if (!dims.empty()) attrs.emplace_back("axes", dims);  // empty: every axis, ONNX's default too
  c.emit(n, "ReduceMean", {c.input(a, "self")}, attrs);
}

/// True when `s` is `sym_size(self, position)`: the size of `self`'s own dimension `position`.
bool is_own_size(const Node& s, const Node& self, size_t position) {
  if (s.target() != "sym_size") return false;
  const NodeArgs sa(s);
  return sa["self"].is_node() && sa["self"].node() == &self && sa["dim"].is_int() &&
         sa["dim"].to_int() == static_cast<int64_t>(position);
}

/// view(self, size) / reshape(self, shape), the sizes argument called `sizes_name`. A size
/// read from the input itself (`x.size(i)` at position i) becomes ONNX's 0 ("copy this
/// dimension"), so the batch dimension stays symbolic; `view(x.size(0), -1)` is ONNX's Flatten.
void reshape(ExportContext& c, const Node& n, const NodeArgs& a, std::string_view sizes_name) {
  const Node& self = a.producer("self");
  const std::string x = c.input(a, "self");
  std::vector<int64_t> shape;
  const fx::Argument& sizes_arg = a[sizes_name];
  QFLOW_ONNX_CHECK(sizes_arg.is_int_list(), n, "argument '{}' must be int[], got {}", sizes_name,
                   fx::format_argument(sizes_arg));
  const auto& sizes = sizes_arg.int_list();
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (const auto* v = std::get_if<int64_t>(&sizes[i])) {
      QFLOW_ONNX_CHECK(*v != 0, n, "a size of 0 would mean 'copy' in ONNX's Reshape");
      shape.push_back(*v);
      continue;
    }
    const Node* s = std::get<Node*>(sizes[i]);
    QFLOW_ONNX_CHECK(is_own_size(*s, self, i), n,
                     "size {} is computed by %{}; ONNX export supports symbolic sizes only as the input's own size "
                     "at the same position (x.size({}))",
                     i, s->name(), i);
    shape.push_back(0);
  }
  if (shape.size() == 2 && shape[0] == 0 && shape[1] == -1) return c.emit(n, "Flatten", {x}, {Attr("axis", 1)});
  c.emit(n, "Reshape", {x, c.builder.int64s(ExportContext::tmp(n, "shape"), shape)});
}

void flatten(ExportContext& c, const Node& n, const NodeArgs& a) {
  const auto& in = c.shape(a.producer("self"));
  const auto rank = static_cast<int64_t>(in.size());
  int64_t start = a["start_dim"].to_int(), end = a["end_dim"].to_int();
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  const std::string x = c.input(a, "self");
  if (start == 1 && end == rank - 1) return c.emit(n, "Flatten", {x}, {Attr("axis", 1)});
  // Leading dims copied (0), the flattened run as -1, trailing dims by their fixed size.
  std::vector<int64_t> shape(static_cast<size_t>(start), 0);
  shape.push_back(-1);
  for (int64_t i = end + 1; i < rank; ++i) shape.push_back(in[static_cast<size_t>(i)]);
  c.emit(n, "Reshape", {x, c.builder.int64s(ExportContext::tmp(n, "shape"), shape)});
}

void transpose_2d(ExportContext& c, const Node& n, const NodeArgs& a) {
  if (c.shape(a.producer("self")).size() < 2) return c.alias(n, a["self"]);
  c.emit(n, "Transpose", {c.input(a, "self")}, {Attr("perm", std::vector<int64_t>{1, 0})});
}

void addmm(ExportContext& c, const Node& n, const NodeArgs& a) {
  c.emit(n, "Gemm", {c.input(a, "mat1"), c.input(a, "mat2"), c.input(a, "self")},
         {Attr("beta", static_cast<float>(scalar_arg(a, "beta"))),
          Attr("alpha", static_cast<float>(scalar_arg(a, "alpha")))});
}

void cat(ExportContext& c, const Node& n, const NodeArgs& a) {
  const fx::Argument& tensors = a["tensors"];
  QFLOW_ONNX_CHECK(tensors.is_node_list(), n, "cat: expected a list of tensors, got {}", fx::format_argument(tensors));
  std::vector<std::string> inputs;
  for (const Node* t : tensors.node_list()) inputs.push_back(c.value(*t, n));
  c.emit(n, "Concat", inputs, {Attr("axis", a["dim"].to_int())});
}

void native_dropout(ExportContext& c, const Node& n, const NodeArgs& a) {
  QFLOW_ONNX_CHECK(!a["train"].to_bool(), n, "dropout in training mode is random; export the model in eval mode");
  // Eval dropout is the identity; its keep-mask output has no ONNX value.
  c.bind(n, {c.input(a, "input"), ""});
}

void batch_norm(ExportContext& c, const Node& n, const NodeArgs& a) {
  QFLOW_ONNX_CHECK(!a["training"].to_bool(), n, "batch_norm with training=True normalises with batch statistics; "
                                                "ONNX's BatchNormalization uses running statistics (export in eval mode)");
  QFLOW_ONNX_CHECK(!a["running_mean"].is_none() && !a["running_var"].is_none(), n,
                   "batch_norm without running statistics");
  const auto channels = c.shape(a.producer("input")).at(1);
  const DType dt = c.dtype(n);
  auto affine = [&](std::string_view name, double fill) {
    if (!a[name].is_none()) return c.input(a, name);
    return c.builder.initializer(ExportContext::tmp(n, name), full({channels}, fill, dt));
  };
  c.emit(n, "BatchNormalization",
         {c.input(a, "input"), affine("weight", 1.0), affine("bias", 0.0), c.input(a, "running_mean"),
          c.input(a, "running_var")},
         {Attr("epsilon", static_cast<float>(a["eps"].to_double())),
          Attr("momentum", static_cast<float>(1.0 - a["momentum"].to_double()))});
}

void conv2d(ExportContext& c, const Node& n, const NodeArgs& a) {
  const auto& w = c.shape(a.producer("weight"));
  QFLOW_ONNX_CHECK(w.size() == 4, n, "conv2d weight must be 4-d, got shape [{}]", fmt::join(w, ", "));
  std::vector<std::string> inputs{c.input(a, "input"), c.input(a, "weight")};
  if (!a["bias"].is_none()) inputs.push_back(c.input(a, "bias"));
  c.emit(n, "Conv", inputs,
         {Attr("kernel_shape", std::vector<int64_t>{w[2], w[3]}), Attr("strides", pair_arg(a, "stride")),
          Attr("pads", pads_of(pair_arg(a, "padding"))), Attr("dilations", pair_arg(a, "dilation")),
          Attr("group", a["groups"].to_int())});
}

// The converters that only adapt another's arguments (the rest are declared by their ops'
// `onnx` and `onnx_arg`, Note [One declaration per op]).
void relu6(ExportContext& c, const Node& n, const NodeArgs& a) { clip(c, n, a, 0.0, 6.0); }

void hardtanh(ExportContext& c, const Node& n, const NodeArgs& a) {
  clip(c, n, a, scalar_arg(a, "min_val"), scalar_arg(a, "max_val"));
}

void clamp(ExportContext& c, const Node& n, const NodeArgs& a) {
  auto bound = [&](std::string_view name) {
    return a[name].is_none() ? std::nullopt : std::optional<double>(scalar_arg(a, name));
  };
  clip(c, n, a, bound("min"), bound("max"));
}

void leaky_relu(ExportContext& c, const Node& n, const NodeArgs& a) {
  c.emit(n, "LeakyRelu", {c.input(a, "self")}, {Attr("alpha", static_cast<float>(scalar_arg(a, "negative_slope")))});
}

void div(ExportContext& c, const Node& n, const NodeArgs& a) {
  QFLOW_ONNX_CHECK(is_floating(c.dtype(n)), n, "integer division rounds differently in ONNX");
  binary(c, n, a, "Div");
}

void div_scalar(ExportContext& c, const Node& n, const NodeArgs& a) {
  QFLOW_ONNX_CHECK(is_floating(c.dtype(n)), n, "integer division rounds differently in ONNX");
  binary_scalar(c, n, a, "Div");
}

void mm(ExportContext& c, const Node& n, const NodeArgs& a) {
  c.emit(n, "MatMul", {c.input(a, "self"), c.input(a, "mat2")});
}

void contiguous(ExportContext& c, const Node& n, const NodeArgs& a) { c.alias(n, a["self"]); }

// A symbolic size has no tensor value; reshape reads it from the graph (see reshape).
void sym_size(ExportContext&, const Node&, const NodeArgs&) {}

}  // namespace

}  // namespace qflow::onnx::detail

#include "onnx/src/float_ops.onnx.inc"
