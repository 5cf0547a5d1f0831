// quantized_conv2d: the integer convolution of a deployed int8 model.
//
// Note [Integer convolution]
// y[n, o] = output_scale[o] * sum over (c, kh, kw) of (x - zero_point) * w  +  bias[o]   (float32),
// then ReLU when asked, with x the layer's quantized input (uint8 for affine grids, int8 for
// symmetric ones), w its int8 weights (zero point 0, per-channel or per-tensor scale s_w) and
// output_scale = s_x * s_w: the dequantized result of conv2d(dequant(x), dequant(w)) + bias, with
// the sums exact in int32 instead of rounded in float. Zero padding is a real zero (the input's
// zero point), as in the float model. On oneDNN (u8/s8 × s8, VNNI where the CPU has it) the
// scales are baked into the layer's primitive, and the bias enters as bias / output_scale because
// oneDNN adds it before scaling: the result differs from the formula by float rounding only.
// Elsewhere (the im2col engine, grouped convolutions, a zero scale) the sums run in float64 —
// exact for any int8 layer — and the scaling in float32.
//
// An `add` operand (the residual of a ResNet block) joins y before the ReLU: oneDNN adds it as a
// binary post-op while the output tile is in registers. With an integer `dtype` the result is
// requantized in the same pass, q = clamp(round_half_even(y) + output_zero_point, output_min,
// output_max): the caller folds the next layer's 1/scale into output_scale and bias, so q is the
// next layer's quantized input (Note [Integer activations]).
//
// quantized_conv2d_add_ adds into the residual itself (oneDNN's sum post-op) when nothing reads
// the residual afterwards. Same values as the binary add — y + residual in float32, then the
// ReLU — but oneDNN 2.6's direct (brgemm) int8 kernels take a sum and refuse a full-tensor
// binary operand, which sends the binary form to its older kernels: measured per ResNet18 layer
// at batch 128 (one thread, CPU time), the sum form costs 0.65-0.97x the binary one, least on
// the deep layers (512 channels at 4x4: 16.6 against 25.1 ms).
#include <climits>
#include <cmath>

#include "kernels/conv/im2col.h"
#include "kernels/common/kernel_utils.h"
#include "kernels/onednn/conv_int8.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"
#include "kernels/common/spatial_utils.h"

namespace qflow {
namespace kernels {
namespace {

Tensor optional_tensor(const Value& v) { return v.is_tensor() ? v.tensor() : Tensor(); }

QuantizedOutput output_of(const OpArgs& a) {
  return {a.dtype("dtype"), a.to_int("output_zero_point"), a.to_int("output_min"), a.to_int("output_max")};
}

ConvGeometry quantized_conv_geometry(const OpArgs& a) {
  const char* op = "quantized_conv2d";
  const Tensor& x = a.tensor("input");
  const Tensor& w = a.tensor("weight");
  const Tensor& scale = a.tensor("output_scale");
  QFLOW_CHECK(x.dtype() == DType::UInt8 || x.dtype() == DType::Int8, "{}: expected a uint8 or int8 input, got {}", op,
              x.dtype());
  QFLOW_CHECK(w.dtype() == DType::Int8, "{}: expected int8 weights, got {}", op, w.dtype());
  QFLOW_CHECK(x.dim() == 4, "{}: expected a 4-d input (N, C, H, W), got shape {}", op, x.sizes());
  const ConvGeometry g = conv_geometry(x.sizes(), w.sizes(), a.int_list("stride"), a.int_list("padding"),
                                       a.int_list("dilation"), a.to_int("groups"), op);
  QFLOW_CHECK(scale.dtype() == DType::Float32 && (scale.numel() == 1 || scale.numel() == g.o) && scale.dim() <= 1,
              "{}: output_scale must be float32 with 1 or {} (output channels) elements, got {} of shape {}", op, g.o,
              scale.dtype(), scale.sizes());
  if (const Tensor b = optional_tensor(a["bias"]); b.defined()) {
    QFLOW_CHECK(b.dtype() == DType::Float32 && b.sizes() == std::vector<int64_t>{g.o},
                "{}: bias must be float32 of shape [{}], got {} of shape {}", op, g.o, b.dtype(), b.sizes());
  }
  // Any int32 zero point: an affine grid's zero point is negative when the range lies above 0.
  const int64_t zp = a.to_int("input_zero_point");
  QFLOW_CHECK(zp >= INT32_MIN && zp <= INT32_MAX, "{}: input_zero_point {} does not fit int32", op, zp);
  const QuantizedOutput out = output_of(a);
  if (const Tensor add = optional_tensor(a["add"]); add.defined()) {
    QFLOW_CHECK(add.dtype() == DType::Float32 && add.sizes() == g.output_sizes(),
                "{}: add must be float32 of the output's shape {}, got {} of shape {}", op, g.output_sizes(),
                add.dtype(), add.sizes());
    QFLOW_CHECK(out.dtype == DType::Float32, "{}: add needs a float32 output, not {}", op, out.dtype);
  }
  if (out.dtype != DType::Float32) {
    QFLOW_CHECK(out.dtype == DType::UInt8 || out.dtype == DType::Int8,
                "{}: dtype must be float32, uint8 or int8, got {}", op, out.dtype);
    const int64_t lo = out.dtype == DType::UInt8 ? 0 : -128, hi = out.dtype == DType::UInt8 ? 255 : 127;
    QFLOW_CHECK(lo <= out.min && out.min <= out.max && out.max <= hi,
                "{}: the output grid [{}, {}] does not fit {}", op, out.min, out.max, out.dtype);
    QFLOW_CHECK(out.min <= out.zero_point && out.zero_point <= out.max,
                "{}: output_zero_point {} lies outside the grid [{}, {}]", op, out.zero_point, out.min, out.max);
  }
  return g;
}

std::vector<TensorMeta> quantized_conv_meta(const OpArgs& a) {
  return one(quantized_conv_geometry(a).output_sizes(), a.dtype("dtype"));
}

// The float64 path: exact integer sums through conv2d, then the float32 scaling (and rounding).
Tensor reference_conv(const ConvGeometry& g, const OpArgs& a, const Tensor& scale, const Tensor& bias, bool relu,
                      const Tensor& addend) {
  const Tensor x = sub(a.tensor("input").to(DType::Float64), Scalar(a.to_int("input_zero_point")));
  const Tensor sums = conv2d(x, a.tensor("weight").to(DType::Float64), std::nullopt, a.int_list("stride"),
                             a.int_list("padding"), a.int_list("dilation"), g.groups)
                          .to(DType::Float32);
  Tensor y = mul(sums, scale.numel() == 1 ? scale.reshape({}) : scale.view({1, g.o, 1, 1}));
  if (bias.defined()) y = add(y, bias.view({1, g.o, 1, 1}));
  if (addend.defined()) y = add(y, addend);
  if (relu) relu_(y);
  const QuantizedOutput out = output_of(a);
  if (out.dtype == DType::Float32) return y;
  // round() rounds half to even, as oneDNN's conversion does.
  return clamp(add(round(y), Scalar(out.zero_point)), Scalar(out.min), Scalar(out.max))
      .to(out.dtype);
}

// The input and the addend may come in an opaque layout (the previous layer's nhwc output);
// every other argument is plain.
// quantized_conv2d's arguments as both kernels read them: every tensor but the input and the
// addend plain (those two may come in the previous layer's opaque layout), the geometry checked,
// the per-layer tensors contiguous and the scales as values.
struct IntegerConvArgs {
  ConvGeometry g;
  Tensor w, scale, bias;
  std::vector<float> scales;
};

IntegerConvArgs read_args(OpArgs& a) {
  for (const ArgSpec& arg : a.schema().args) {
    if (arg.name == "input" || arg.name == "add") continue;
    if (const Value& v = a[arg.name]; v.is_tensor() && v.tensor().defined()) v.tensor().impl()->make_plain();
  }
  const Tensor bias = optional_tensor(a["bias"]);
  IntegerConvArgs r{quantized_conv_geometry(a),
                    contiguous(a.tensor("weight")),
                    contiguous(a.tensor("output_scale")),
                    bias.defined() ? contiguous(bias) : Tensor(),
                    {}};
  r.scales.assign(r.scale.data_ptr<float>(), r.scale.data_ptr<float>() + r.scale.numel());
  return r;
}

Stack quantized_conv_kernel(OpArgs& a) {
  const IntegerConvArgs c = read_args(a);
  const Tensor addend = optional_tensor(a["add"]);
  const bool relu = a.to_bool("relu");
  if (onednn::handles_int8(c.g, c.scales))
    return out(onednn::conv2d_int8(c.g, a.tensor("input"), a.to_int("input_zero_point"), c.w, c.scales, c.bias, relu,
                                   addend, output_of(a)));
  make_plain_args(a);
  return out(reference_conv(c.g, a, c.scale, c.bias, relu, addend));
}

const OpSchema& quantized_conv_schema() {
  static const OpHandle op("quantized_conv2d");
  return op.get().schema;
}

// quantized_conv2d_add_'s arguments as quantized_conv2d's, with self as its `add` (and a
// float32 output, the default).
Stack as_quantized_conv_args(const OpArgs& a) {
  return named_stack(quantized_conv_schema(), {{"input", a["input"]}, {"weight", a["weight"]},
                                               {"output_scale", a["output_scale"]}, {"bias", a["bias"]},
                                               {"input_zero_point", a["input_zero_point"]}, {"stride", a["stride"]},
                                               {"padding", a["padding"]}, {"dilation", a["dilation"]},
                                               {"groups", a["groups"]}, {"relu", a["relu"]}, {"add", a["self"]}});
}

std::vector<TensorMeta> quantized_conv_add_meta(const OpArgs& a) {
  Stack conv = as_quantized_conv_args(a);
  (void)quantized_conv_geometry(OpArgs(quantized_conv_schema(), conv));
  return one(a.tensor("self").sizes(), a.tensor("self").dtype());
}

// self = relu(self + quantized_conv2d(...)): oneDNN's sum post-op writes self in place when it is
// in the kernel's float32 layout (the direct kernels run it; a binary add would take slower
// ones); otherwise the out-of-place result is copied into self.
Stack quantized_conv_add_kernel(OpArgs& a) {
  Stack conv = as_quantized_conv_args(a);
  OpArgs b(quantized_conv_schema(), conv);
  Tensor& self = a.tensor("self");
  const IntegerConvArgs c = read_args(b);
  if (onednn::handles_int8(c.g, c.scales) &&
      onednn::conv2d_int8_accumulate(c.g, b.tensor("input"), b.to_int("input_zero_point"), c.w, c.scales, c.bias,
                                     b.to_bool("relu"), self)) {
    self.impl()->storage()->bump_version();
    return out(self);
  }
  self.copy_(quantized_conv_kernel(b)[0].tensor());
  return out(self);
}

}  // namespace
}  // namespace kernels

Tensor quantized_conv2d(const Tensor& input, const Tensor& weight, const Tensor& output_scale, const Tensor& bias,
                        int64_t input_zero_point, const IntList& stride, const IntList& padding, const IntList& dilation,
                        int64_t groups, bool relu, const Tensor& add, const QuantizedOutput& output) {
  QFLOW_OP_HANDLE("quantized_conv2d");
  return call_tensor(op, {{"input", input}, {"weight", weight}, {"output_scale", output_scale},
                          {"bias", bias.defined() ? Value(bias) : Value()}, {"input_zero_point", input_zero_point},
                          {"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups},
                          {"relu", relu}, {"add", add.defined() ? Value(add) : Value()}, {"dtype", output.dtype},
                          {"output_zero_point", output.zero_point}, {"output_min", output.min},
                          {"output_max", output.max}});
}

Tensor& quantized_conv2d_add_(Tensor& self, const Tensor& input, const Tensor& weight, const Tensor& output_scale,
                              const Tensor& bias, int64_t input_zero_point, const IntList& stride,
                              const IntList& padding, const IntList& dilation, int64_t groups, bool relu) {
  QFLOW_OP_HANDLE("quantized_conv2d_add_");
  call_tensor(op, {{"self", self}, {"input", input}, {"weight", weight}, {"output_scale", output_scale},
                   {"bias", bias.defined() ? Value(bias) : Value()}, {"input_zero_point", input_zero_point},
                   {"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups},
                   {"relu", relu}});
  return self;
}

}  // namespace qflow

// The registration of core/ops/quantized_conv.toml (Note [One declaration per op]).
#include "core/ops/quantized_conv.inc"
