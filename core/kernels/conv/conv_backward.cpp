// 2-D convolution backward: conv2d_backward computes the requested gradients w.r.t. input,
// weight and bias in one pass over the batch, sharing the column buffer between them.
// See Note [Convolution as GEMM].
#include "kernels/conv/im2col.h"
#include "kernels/onednn/conv_onednn.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/parallel.h"
#include "kernels/common/spatial_utils.h"

namespace qflow {
namespace kernels {
namespace {

constexpr const char* kOp = "conv2d_backward";

struct ConvGrads {
  Tensor input, weight, bias;  // undefined when not requested
};

ConvGeometry backward_geometry(const OpArgs& a) {
  const Tensor& gy = a.tensor("grad_output");
  const Tensor& x = a.tensor("input");
  const Tensor& w = a.tensor("weight");
  ConvGeometry g = conv_geometry(x.sizes(), w.sizes(), a.int_list("stride"), a.int_list("padding"),
                                 a.int_list("dilation"), a.to_int("groups"), kOp);
  QFLOW_CHECK(gy.sizes() == g.output_sizes(),
              "{}: expected grad_output of shape {} (the conv2d output for input of shape {} and weight of shape {}), got {}",
              kOp, g.output_sizes(), x.sizes(), w.sizes(), gy.sizes());
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a float32 or float64 input, got {}", kOp, x.dtype());
  QFLOW_CHECK(w.dtype() == x.dtype() && gy.dtype() == x.dtype(),
              "{}: grad_output ({}), input ({}) and weight ({}) must have the same dtype", kOp, gy.dtype(), x.dtype(), w.dtype());
  return g;
}

// Sum of p[0, n) with 8 independent partial sums, which the compiler turns into vector adds
// (a single accumulator would stay scalar: float addition is not associative).
template <typename T>
T plane_sum(const T* p, int64_t n) {
  T part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) part[k] += p[i + k];
  T s = 0;
  for (; i < n; ++i) s += p[i];
  for (int k = 0; k < 8; ++k) s += part[k];
  return s;
}

// gb[o] = sum over n and positions of gy[n, o, :]; gy: (N, O, L).
template <typename T>
void bias_grad(const ConvGeometry& g, const T* gy, T* gb) {
  const int64_t L = g.l();
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.n * L, 1));
  parallel_for(g.o, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      T acc = 0;
      for (int64_t n = 0; n < g.n; ++n) acc += plane_sum(gy + (n * g.o + o) * L, L);
      gb[o] = acc;
    }
  });
}

// 1x1 stride-1 unpadded conv, one image at a time: the input plane (C, H W) is col.
template <typename T>
void pointwise_backward(const ConvGeometry& g, const T* gy, const T* x, const T* w, T* gx, T* gw) {
  const int64_t L = g.l(), Og = g.og(), Cg = g.kg();
  for (int64_t n = 0; n < g.n; ++n) {
    for_each_group(g.groups, Og * Cg * L, [&](int64_t grp) {
      const T* dy = gy + (n * g.o + grp * Og) * L;
      if (gw)
        gemm<T>(false, true, Og, Cg, L, T(1), dy, L, x + (n * g.c + grp * Cg) * L, L, n == 0 ? T(0) : T(1),
                gw + grp * Og * Cg, Cg);
      if (gx) gemm<T>(true, false, Cg, L, Og, T(1), w + grp * Og * Cg, Cg, dy, L, T(0), gx + (n * g.c + grp * Cg) * L, L);
    });
  }
}

// gy: (N, O, Ho, Wo), x: (N, C, H, W), w: (O, C / groups, kH, kW) → gx (like x) and gw (like
// w), each only when non-null. Chunks of images share one GEMM (Note [Convolution as GEMM]).
template <typename T>
void input_weight_grads(const ConvGeometry& g, const T* gy, const T* x, const T* w, T* gx, T* gw, DType dtype) {
  const int64_t L = g.l(), Og = g.og(), Kg = g.kg(), in_image = g.c * g.h * g.w;
  const int64_t chunk = g.chunk_images(sizeof(T));
  if (g.depthwise()) return depthwise_backward(g, gy, x, w, gx, gw);
  if (g.direct_pointwise()) return pointwise_backward(g, gy, x, w, gx, gw);
  Tensor col_t = new_tensor({g.c * g.kh * g.kw * chunk * L}, dtype);
  Tensor staging = chunk > 1 ? new_tensor({g.o * chunk * L}, dtype) : Tensor();
  T* col = col_t.data_ptr<T>();
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t b = std::min(chunk, g.n - n0), width = b * L;
    // dY of the chunk as (O, B L); for one image the NCHW slab already is.
    const T* dy = gy + n0 * g.o * L;
    if (b > 1) {
      swap_outer_dims<T>(dy, b, g.o, L, nullptr, staging.data_ptr<T>());
      dy = staging.data_ptr<T>();
    }
    if (gw) {
      im2col(g, x + n0 * in_image, b, col);
      for_each_group(g.groups, Og * Kg * width, [&](int64_t grp) {
        gemm<T>(false, true, Og, Kg, width, T(1), dy + grp * Og * width, width, col + grp * Kg * width, width,
                n0 == 0 ? T(0) : T(1), gw + grp * Og * Kg, Kg);
      });
    }
    if (gx) {
      for_each_group(g.groups, Og * Kg * width, [&](int64_t grp) {
        gemm<T>(true, false, Kg, width, Og, T(1), w + grp * Og * Kg, Kg, dy + grp * Og * width, width, T(0),
                col + grp * Kg * width, width);
      });
      col2im(g, col, b, gx + n0 * in_image);
    }
  }
}

std::vector<TensorMeta> conv2d_backward_meta(const OpArgs& a) {
  const ConvGeometry g = backward_geometry(a);
  const DType dt = a.tensor("input").dtype();
  // Shapes of all three gradients; the ones not requested come back undefined at run time.
  return {TensorMeta{a.tensor("input").sizes(), dt}, TensorMeta{a.tensor("weight").sizes(), dt}, TensorMeta{{g.o}, dt}};
}

Stack conv2d_backward_kernel(OpArgs& a) {
  const ConvGeometry g = backward_geometry(a);
  const Tensor& input = a.tensor("input");
  const bool want_input = a.to_bool("input_grad"), want_weight = a.to_bool("weight_grad"),
             want_bias = a.to_bool("bias_grad");
  const DType dt = input.dtype();
  const Tensor w = want_input ? contiguous(a.tensor("weight")) : Tensor();
  ConvGrads r;
  if (onednn::handles(g, dt)) {  // blocked activations stay blocked (Note [Opaque layouts])
    const auto batched = [](const Tensor& t) { return t.impl()->opaque_layout() ? t : as_batched(t); };
    const Tensor gy = batched(a.tensor("grad_output"));
    const Tensor x = want_weight ? batched(input) : Tensor();
    if (want_input) {
      r.input = onednn::conv2d_backward_data(g, gy, w);
      if (input.dim() == 3) r.input.impl()->make_plain();  // a blocked layout is 4-D
      r.input = unbatch_like(r.input, input.dim());
    }
    if (want_weight) std::tie(r.weight, r.bias) = onednn::conv2d_backward_weights(g, gy, x, want_bias);
    if (want_bias && !want_weight) {
      gy.impl()->make_plain();
      r.bias = new_tensor({g.o}, dt);
      bias_grad<float>(g, gy.data_ptr<float>(), r.bias.data_ptr<float>());
    }
    return Stack{Value(r.input), Value(r.weight), Value(r.bias)};
  }
  make_plain_args(a);
  const Tensor gy = as_batched(a.tensor("grad_output"));
  const Tensor x = want_weight ? as_batched(input) : Tensor();
  if (want_input) r.input = new_tensor({g.n, g.c, g.h, g.w}, dt);
  if (want_weight) r.weight = new_tensor(a.tensor("weight").sizes(), dt);
  if (want_bias) r.bias = new_tensor({g.o}, dt);
  SingleThreadedBlas blas_guard;  // See Note [Threads in conv]
  visit_floating(dt, kOp, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (want_bias) bias_grad<T>(g, gy.data_ptr<T>(), r.bias.data_ptr<T>());
    if (want_weight && g.n == 0) fill_(r.weight, 0);
    if (g.n == 0 || (!want_input && !want_weight)) return;
    input_weight_grads<T>(g, gy.data_ptr<T>(), want_weight ? x.data_ptr<T>() : nullptr,
                          want_input ? w.data_ptr<T>() : nullptr, want_input ? r.input.data_ptr<T>() : nullptr,
                          want_weight ? r.weight.data_ptr<T>() : nullptr, dt);
  });
  if (r.input.defined()) r.input = unbatch_like(r.input, input.dim());
  return Stack{Value(r.input), Value(r.weight), Value(r.bias)};
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                   const IntList& stride, const IntList& padding,
                                                   const IntList& dilation, int64_t groups, bool input_grad,
                                                   bool weight_grad, bool bias_grad) {
  QFLOW_OP_HANDLE("conv2d_backward");
  Stack r = call(op, {{"grad_output", grad_output}, {"input", input}, {"weight", weight}, {"stride", stride},
                      {"padding", padding}, {"dilation", dilation}, {"groups", groups}, {"input_grad", input_grad},
                      {"weight_grad", weight_grad}, {"bias_grad", bias_grad}});
  return {std::move(r.at(0).tensor()), std::move(r.at(1).tensor()), std::move(r.at(2).tensor())};
}

}  // namespace qflow

// The registration and typed functions of core/ops/conv_backward.toml (Note [One declaration per op]).
#include "core/ops/conv_backward.inc"
