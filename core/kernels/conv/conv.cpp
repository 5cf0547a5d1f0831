// 2-D convolution forward: conv2d, and conv2d_relu = relu(conv2d) (a oneDNN post-op; the
// other engines apply relu_ to their output). float32 runs on oneDNN (Note [oneDNN
// convolution]); float64 and what oneDNN does not take are lowered to im2col + OpenBLAS GEMM
// (Note [Convolution as GEMM]). The backward op lives in conv_backward.cpp.
#include "kernels/conv/im2col.h"
#include "kernels/onednn/conv_onednn.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"
#include "kernels/common/spatial_utils.h"

namespace qflow {
namespace kernels {
namespace {

// Validates conv2d's arguments (shared by the shape rule and the kernel).
ConvGeometry conv2d_geometry(const OpArgs& a, const char* op = "conv2d") {
  const Tensor& x = a.tensor("input");
  const Tensor& w = a.tensor("weight");
  ConvGeometry g = conv_geometry(x.sizes(), w.sizes(), a.int_list("stride"), a.int_list("padding"),
                                 a.int_list("dilation"), a.to_int("groups"), op);
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {}", op, x.dtype());
  QFLOW_CHECK(w.dtype() == x.dtype(), "{}: weight dtype {} does not match input dtype {}", op, w.dtype(), x.dtype());
  if (a["bias"].is_tensor() && a.tensor("bias").defined()) {
    const Tensor& b = a.tensor("bias");
    QFLOW_CHECK(b.sizes() == std::vector<int64_t>{g.o}, "{}: expected bias of shape [{}] for weight of shape {}, got bias of shape {}",
                op, g.o, w.sizes(), b.sizes());
    QFLOW_CHECK(b.dtype() == x.dtype(), "{}: bias dtype {} does not match input dtype {}", op, b.dtype(), x.dtype());
  }
  return g;
}

// y[n, o, :] += bias[o] for y: (N, O, L).
template <typename T>
void add_bias(T* y, const T* bias, int64_t n, int64_t o, int64_t l) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(l, 1));
  parallel_for(n * o, grain, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T v = bias[plane % o];
      T* p = y + plane * l;
      for (int64_t k = 0; k < l; ++k) p[k] += v;
    }
  });
}

// x: (N, C, H, W), w: (O, C / groups, kH, kW), bias: (O,) or null → y: (N, O, Ho, Wo).
template <typename T>
void conv2d_forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y, DType dtype) {
  const int64_t L = g.l(), Og = g.og(), Kg = g.kg(), in_image = g.c * g.h * g.w;
  const int64_t chunk = g.chunk_images(sizeof(T));
  if (g.n == 0) return;
  if (g.depthwise()) return depthwise_forward(g, x, w, bias, y);
  if (g.direct_pointwise()) {  // the input plane (C, H W) is the column matrix
    for (int64_t n = 0; n < g.n; ++n)
      for_each_group(g.groups, Og * L * Kg, [&](int64_t grp) {
        gemm<T>(false, false, Og, L, Kg, T(1), w + grp * Og * Kg, Kg, x + n * in_image + grp * Kg * L, L, T(0),
                y + (n * g.o + grp * Og) * L, L);
      });
    if (bias) add_bias(y, bias, g.n, g.o, L);
    return;
  }
  Tensor col = new_tensor({g.c * g.kh * g.kw * chunk * L}, dtype);
  Tensor staging = chunk > 1 ? new_tensor({g.o * chunk * L}, dtype) : Tensor();
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t b = std::min(chunk, g.n - n0), width = b * L;
    im2col(g, x + n0 * in_image, b, col.data_ptr<T>());
    // One image: the GEMM result (O, L) already is the NCHW slab of that image.
    T* dst = b == 1 ? y + n0 * g.o * L : staging.data_ptr<T>();
    const T* cols = col.data_ptr<T>();
    for_each_group(g.groups, Og * width * Kg, [&](int64_t grp) {
      gemm<T>(false, false, Og, width, Kg, T(1), w + grp * Og * Kg, Kg, cols + grp * Kg * width, width, T(0),
              dst + grp * Og * width, width);
    });
    if (b == 1) {
      if (bias) add_bias(dst, bias, 1, g.o, L);
    } else {
      swap_outer_dims(dst, g.o, b, L, bias, y + n0 * g.o * L);
    }
  }
}

template <bool kRelu>
std::vector<TensorMeta> conv2d_meta(const OpArgs& a) {
  return one(conv2d_geometry(a, kRelu ? "conv2d_relu" : "conv2d").output_sizes(), a.tensor("input").dtype());
}

template <bool kRelu>
Stack conv2d_kernel(OpArgs& a) {
  const ConvGeometry g = conv2d_geometry(a, kRelu ? "conv2d_relu" : "conv2d");
  const Tensor& input = a.tensor("input");
  const Tensor w = contiguous(a.tensor("weight"));
  const Tensor bias = a["bias"].is_tensor() && a.tensor("bias").defined() ? contiguous(a.tensor("bias")) : Tensor();
  // conv2d takes blocked activations (Note [Opaque layouts]); only oneDNN reads them as such.
  if (onednn::handles(g, input.dtype())) {
    const Tensor x = input.impl()->opaque_layout() ? input : as_batched(input);
    Tensor y = onednn::conv2d_forward(g, x, w, bias, kRelu);
    if (input.dim() == 3) y.impl()->make_plain();  // a blocked layout is 4-D
    return out(unbatch_like(y, input.dim()));
  }
  make_plain_args(a);
  const Tensor x = as_batched(input);
  Tensor y = new_tensor({g.n, g.o, g.oh, g.ow}, input.dtype());
  SingleThreadedBlas blas_guard;  // See Note [Threads in conv]
  visit_floating(input.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv2d_forward<T>(g, x.data_ptr<T>(), w.data_ptr<T>(), bias.defined() ? bias.data_ptr<T>() : nullptr,
                      y.data_ptr<T>(), input.dtype());
  });
  if (kRelu) relu_(y);
  return out(unbatch_like(y, input.dim()));
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

namespace {
// conv2d and conv2d_relu take the same arguments.
Tensor call_conv2d(const OpHandle& op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const IntList& stride, const IntList& padding, const IntList& dilation, int64_t groups) {
  // An undefined bias (a layer built with bias = false) means None, so autograd sees 2 inputs.
  Value b = bias && bias->defined() ? Value(*bias) : Value();
  return call_tensor(op, {{"input", input}, {"weight", weight}, {"bias", std::move(b)}, {"stride", stride},
                          {"padding", padding}, {"dilation", dilation}, {"groups", groups}});
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const IntList& stride,
              const IntList& padding, const IntList& dilation, int64_t groups) {
  QFLOW_OP_HANDLE("conv2d");
  return call_conv2d(op, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const IntList& stride,
                   const IntList& padding, const IntList& dilation, int64_t groups) {
  QFLOW_OP_HANDLE("conv2d_relu");
  return call_conv2d(op, input, weight, bias, stride, padding, dilation, groups);
}

std::string conv2d_kernel_name(const std::vector<int64_t>& input_sizes, const std::vector<int64_t>& weight_sizes,
                               DType dtype, const IntList& stride, const IntList& padding, const IntList& dilation,
                               int64_t groups) {
  const kernels::ConvGeometry g =
      kernels::conv_geometry(input_sizes, weight_sizes, stride, padding, dilation, groups, "conv2d_kernel_name");
  if (kernels::onednn::handles(g, dtype)) return kernels::onednn::uses_winograd(g) ? "onednn-winograd" : "onednn-direct";
  return g.depthwise() ? "depthwise" : "im2col";
}

}  // namespace qflow

// The registration and typed functions of core/ops/conv.toml (Note [One declaration per op]).
#include "core/ops/conv.inc"
