// Deploy (Q/DQ) converters: DConv2d/DLinear and the fake_quantize op.
//
// Note [Q/DQ export]
// qflow fake-quantizes as q = clamp(round(x / s + zp), qmin, qmax), out = (q − zp)·s. ONNX
// says the same with QuantizeLinear (round half to even, saturate to the integer type) then
// DequantizeLinear, provided the grid [qmin, qmax] is exactly the range of the integer type:
// int8 [−128, 127] (symmetric, 8 bits) or uint8 [0, 255] (affine, 8 bits). Narrower grids
// (bits < 8) need the 4-bit types of opset 21 and wider ones int16 (opset 21 too), so they
// are refused, as is a zero point outside its type's range (an affine observer whose minimum
// stayed above 0). One difference remains: ONNX rounds x / s before adding zp, qflow after,
// so with an odd zero point an exact tie (x / s + zp = k + 0.5) can round one step apart.
// Weights are the deployed layer's own integers q (Note [Deployed module layout]; int8/uint8
// initializer "<path>.weight_quantized") feeding DequantizeLinear (per tensor, or per output
// channel with axis = 0), whose output equals the layer's float weight; nothing is rounded
// again. Bias stays float. A scale of 0 means "not quantized" (qflow's identity): no Q/DQ
// pair is written for it.
#include <fmt/format.h>

#include <cmath>

#include "converter.h"
#include "qflow/core/factory.h"
#include "qflow/quant/deploy.h"

namespace qflow::onnx::detail {
namespace {

struct Grid {
  DType dtype;  // Int8 or UInt8
  int64_t qmin, qmax;
};

Grid onnx_grid(const ExportContext& c, const fx::Node& n, int64_t qmin, int64_t qmax) {
  if (qmin == -128 && qmax == 127) return {DType::Int8, qmin, qmax};
  if (qmin == 0 && qmax == 255) return {DType::UInt8, qmin, qmax};
  fail(n, fmt::format("the quantization grid [{}, {}] cannot be expressed at opset {}: QuantizeLinear saturates to "
                      "int8 [-128, 127] or uint8 [0, 255] only (8-bit symmetric or affine QConfigs; other bit "
                      "widths need opset 21)",
                      qmin, qmax, c.options.opset));
}

/// Zero points as integers of the grid's type; refuses fractional or out-of-range ones.
Tensor integer_zero_points(const fx::Node& n, const Tensor& zp, const Grid& g, std::string_view what) {
  const auto v = to_vector<float>(zp.to(DType::Float32));
  for (float z : v) {
    QFLOW_ONNX_CHECK(std::nearbyint(z) == z, n, "{} zero point {} is not an integer", what, z);
    QFLOW_ONNX_CHECK(z >= static_cast<float>(g.qmin) && z <= static_cast<float>(g.qmax), n,
                     "{} zero point {} is outside the range [{}, {}] of {}, so ONNX cannot represent it", what, z,
                     g.qmin, g.qmax, g.dtype);
  }
  return zp.to(DType::Float32).reshape({static_cast<int64_t>(v.size())}).to(g.dtype);
}

/// QuantizeLinear → DequantizeLinear on value `x` (per tensor, or per channel along `axis`);
/// returns the dequantized value, or x itself for a scale of 0 (not quantized).
std::string quant_dequant(ExportContext& c, const fx::Node& n, const std::string& x, const Tensor& scale,
                          const Tensor& zero_point, int64_t axis, const Grid& g, const std::string& prefix) {
  QFLOW_ONNX_CHECK(c.dtype(n) == DType::Float32, n, "Q/DQ at opset 13 needs float32 values, got {}", c.dtype(n));
  const auto s = to_vector<float>(scale.to(DType::Float32));
  QFLOW_ONNX_CHECK(s.size() == static_cast<size_t>(zero_point.numel()), n, "{} scales but {} zero points", s.size(),
                   zero_point.numel());
  const Tensor zp = integer_zero_points(n, zero_point, g, prefix);
  if (s.size() == 1 && s[0] == 0.0f) return x;  // qflow's identity
  for (float v : s)
    QFLOW_ONNX_CHECK(std::isfinite(v) && v > 0.0f, n, "scale {} of {} cannot be exported (a per-channel scale of 0 "
                     "has no QuantizeLinear equivalent)", v, prefix);
  std::string s_name, zp_name;
  std::vector<Attr> attrs;
  if (s.size() == 1) {
    // Per tensor: 0-d scale and zero point (a 1-element 1-d one would mean "per axis").
    s_name = c.builder.scalar(prefix + "_scale", s[0], DType::Float32);
    zp_name = c.builder.scalar(prefix + "_zero_point", to_vector<float>(zero_point.to(DType::Float32))[0], g.dtype);
  } else {
    s_name = c.builder.initializer(prefix + "_scale", scale.to(DType::Float32).reshape({static_cast<int64_t>(s.size())}));
    zp_name = c.builder.initializer(prefix + "_zero_point", zp);
    attrs.emplace_back("axis", axis);
  }
  const std::string q = prefix + "_quantized", dq = prefix + "_dequantized";
  c.builder.node("QuantizeLinear", {x, s_name, zp_name}, {q}, attrs);
  c.builder.node("DequantizeLinear", {q, s_name, zp_name}, {dq}, attrs);
  return dq;
}

/// A deployed weight (see Note [Q/DQ export]): its integers as an int initializer and
/// DequantizeLinear whose output "<path>.weight" is the float weight the layer computes with.
/// A float initializer when the weight is not quantized (every scale 0).
std::string quantized_weight(ExportContext& c, const fx::Node& n, const Tensor& weight, const Tensor& scale,
                             const Tensor& zero_point, const Grid& g) {
  const std::string path = n.target();
  const auto s = to_vector<float>(scale.to(DType::Float32));
  bool any = false;
  for (float v : s) any = any || v != 0.0f;
  if (!any) return c.builder.initializer(path + ".weight", quant::detail::dequantize_weight(weight, scale, zero_point));
  QFLOW_ONNX_CHECK(weight.dtype() == g.dtype, n,
                   "weight must hold the {} integers of its grid, got {} (a float weight with scales is not on its grid: "
                   "a channel of scale 0 with nonzero weights)",
                   g.dtype, weight.dtype());
  const Tensor zp = integer_zero_points(n, zero_point, g, "weight");
  const auto z = to_vector<float>(zp.to(DType::Float32));
  const size_t channels = s.size();
  QFLOW_ONNX_CHECK(channels == 1 || channels == static_cast<size_t>(weight.sizes()[0]), n,
                   "{} weight scales for {} output channels", channels, weight.sizes()[0]);
  for (size_t ch = 0; ch < channels; ++ch)
    QFLOW_ONNX_CHECK(s[ch] > 0.0f, n, "weight channel {} has scale {}; a per-channel scale of 0 has no "
                     "DequantizeLinear equivalent", ch, s[ch]);
  // The layer's own integers, written as they are: the file holds what the model computes with.
  const Tensor q = weight.contiguous();
  const std::string q_name = c.builder.initializer(path + ".weight_quantized", q);
  std::string s_name, zp_name;
  std::vector<Attr> attrs;
  if (channels == 1) {
    s_name = c.builder.scalar(path + ".weight_scale", s[0], DType::Float32);
    zp_name = c.builder.scalar(path + ".weight_zero_point", z[0], g.dtype);
  } else {
    s_name = c.builder.initializer(path + ".weight_scale", scale.to(DType::Float32));
    zp_name = c.builder.initializer(path + ".weight_zero_point", zp);
    attrs.emplace_back("axis", 0);
  }
  const std::string out = path + ".weight";
  c.builder.node("DequantizeLinear", {q_name, s_name, zp_name}, {out}, attrs);
  return out;
}

template <class D>
std::vector<std::string> deployed_inputs(ExportContext& c, const fx::Node& n, D& d) {
  const quant::QConfig& qc = d.qconfig();
  c.quantized = true;
  c.qconfigs.insert(qc.to_string());
  // Weights on the layer's grid, its input on the activation grid (Note [Weight and activation bits]).
  const Grid weight_grid = onnx_grid(c, n, qc.quant_min(), qc.quant_max());
  const Grid input_grid = onnx_grid(c, n, qc.activations().quant_min(), qc.activations().quant_max());
  const std::string x = quant_dequant(c, n, module_input(c, n), d.input_scale, d.input_zero_point, 0, input_grid,
                                      n.target() + ".input");
  std::vector<std::string> inputs{x,
                                  quantized_weight(c, n, d.weight, d.weight_scale, d.weight_zero_point, weight_grid)};
  if (d.bias.defined()) inputs.push_back(c.builder.initializer(n.target() + ".bias", d.bias));
  return inputs;
}

void dconv2d(ExportContext& c, const fx::Node& n, nn::Module& m) {
  auto& d = static_cast<quant::DConv2d&>(m);
  c.emit(n, "Conv", deployed_inputs(c, n, d), conv_attrs(n, d.options(), d.weight.sizes()));
}

void dlinear(ExportContext& c, const fx::Node& n, nn::Module& m) {
  auto& d = static_cast<quant::DLinear&>(m);
  QFLOW_ONNX_CHECK(c.shape(*n.args()[0].node()).size() == 2, n, "DLinear on a {}-d input; Gemm takes 2-d inputs",
                   c.shape(*n.args()[0].node()).size());
  c.emit(n, "Gemm", deployed_inputs(c, n, d), {Attr("transB", 1)});
}

/// A frozen tensor argument (get_attr): scale and zero point must be constants to export.
Tensor frozen(ExportContext& c, const fx::Node& n, const fx::Argument& a, std::string_view what) {
  QFLOW_ONNX_CHECK(a.is_node() && a.node()->op() == fx::NodeOp::GetAttr, n,
                   "fake_quantize's {} must be a frozen tensor (a parameter, buffer or constant), got {}", what,
                   fx::format_argument(a));
  return c.gm.get_attr(a.node()->target());
}

void fake_quantize(ExportContext& c, const fx::Node& n, const NodeArgs& a) {
  c.quantized = true;
  const Grid g = onnx_grid(c, n, a["quant_min"].to_int(), a["quant_max"].to_int());
  const std::string x = c.input(a, "self");
  const std::string out = quant_dequant(c, n, x, frozen(c, n, a["scale"], "scale"),
                                        frozen(c, n, a["zero_point"], "zero_point"), a["axis"].to_int(), g, n.name());
  c.bind(n, {out});
}

}  // namespace

void add_quant_module_converters(std::unordered_map<std::type_index, ModuleConverter>& t) {
  t[typeid(quant::DConv2d)] = dconv2d;
  t[typeid(quant::DLinear)] = dlinear;
}

}  // namespace qflow::onnx::detail

#include "onnx/src/quant_ops.onnx.inc"
