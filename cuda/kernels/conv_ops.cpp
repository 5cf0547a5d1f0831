// The CUDA kernels of conv2d, conv2d_relu and conv2d_backward: cuDNN's convolutions, with the
// plans of conv_plan.h and the small kernels of conv.cu around them.
//
// Note [cuDNN convolutions]
// The convolutions are cuDNN's legacy C API (cudnnConvolutionForward, ...BackwardData,
// ...BackwardFilter): deprecated in cuDNN 9 but present and as fast as the graph API for these
// shapes (issue 33's measurements), and it needs no cudnn_frontend.
//
// Layout. Activations on the GPU are channels-last: logical sizes (N, C, H, W), strides
// (HWC, 1, WC, C) (Note [Channels-last on the GPU]); NHWC is where cuDNN's TF32 kernels are
// fastest (ResNet18 at batch 512 on an H100: 8.9 ms NHWC against 14.4 ms NCHW). So float32
// convolutions hand cuDNN NHWC tensors only: the output (and the input gradient) is allocated
// with empty_channels_last, a channels-last input is passed as it is, and any other input (the
// NCHW-contiguous batch a data loader delivers, a view) is copied into channels-last once — a
// tiled transpose for NCHW-contiguous, a strided copy_ for anything else. Handing cuDNN a mixed
// NCHW-input / NHWC-output pair instead would skip that copy but restrict it to the few
// algorithms that take mixed layouts, for every convolution downstream of a non-channels-last
// tensor; the copy costs one memory pass, only where a tensor enters the channels-last world
// (the network's input, in practice: every conv output is channels-last, and element-wise,
// batch-norm and pooling outputs keep their input's layout). grad_output gets the same
// treatment. float64 (no tensor cores, no NHWC kernels in cuDNN) runs NCHW-contiguous, and so
// does a float32 call for which cuDNN's heuristic offers no channels-last algorithm for a pass
// it needs (asked once per plan, without running anything): its output is then NCHW-contiguous,
// which every kernel downstream reads as well.
//
// Filters. cuDNN's NHWC kernels want the filter NHWC too (OHWI memory), while parameters stay
// OIHW-contiguous as the CPU and state_dict expect. conv_plan.h's filter_in_layout passes a
// filter that already is OHWI in memory as it is — 1x1 filters and depthwise (C / groups == 1)
// ones are, so most of MobileNetV2's need nothing — and transposes the others into a cached
// copy keyed by (storage, offset) and valid for one storage version (Note [Version counter]):
// the forward and backward-data passes of a training step share one copy, inference reuses it
// forever, and an optimizer step (an in-place update bumps the version) makes the next forward
// transpose again. The weight gradient is computed straight into the OIHW result where OIHW is
// also OHWI, else into an OHWI buffer transposed back: it always comes back OIHW-contiguous,
// like the CPU's.
//
// Choosing the algorithm. Per (device, dtype, layout, math mode, images per call, geometry)
// a Plan (conv_plan.h) holds the tensor, filter and convolution descriptors — one convolution
// descriptor per pass, since each carries its algorithm's math type — and, per pass, the
// algorithm, chosen at the pass's first call by cudnnFind*AlgorithmEx: cuDNN times its
// candidates on the call's own buffers with a workspace of what the largest candidate asks for,
// capped at 256 MiB, and the fastest one the math mode allows is kept for the process (like the
// oneDNN plans of the CPU). Plans sit in a mutex-guarded map; the benchmark runs once per plan
// and pass, under the plan's lock (it synchronises the device: a one-time cost per shape, as
// PyTorch's cudnn.benchmark). If nothing timed fits, cuDNN's heuristic ranking
// (cudnnGet*Algorithm_v7) decides under the same rules.
//
// Math. float32 with allow_tf32() (Note [TF32]: the default) starts from CUDNN_DEFAULT_MATH,
// which lets cuDNN use TF32 tensor cores, and runs each algorithm with the math type cuDNN
// reported for it; strict float32 (!allow_tf32(), what the GPU tests set) uses CUDNN_FMA_MATH,
// refuses candidates reported with a tensor-op math type, and runs the rest as FMA — true
// float32 products. The math mode is part of the plan's key, so switching it mid-process takes
// other plans. float16 down-conversion (TENSOR_OP_MATH_ALLOW_CONVERSION) is never accepted.
//
// Bias and ReLU. cuDNN computes the convolution; the bias (conv2d with a bias) and the ReLU
// (conv2d_relu) are one in-place epilogue pass of conv.cu's bias_act kernel (128-bit
// loads and stores), ReLU defined as the CPU's relu_fn. cudnnConvolutionBiasActivationForward
// could fold that pass into some algorithms, but it needs a bias even for ReLU alone, and its
// identity-activation form runs only IMPLICIT_PRECOMP_GEMM. The bias gradient is conv.cu's
// deterministic two-stage column reduction over (N, H, W) in the tensor's own layout (no
// atomics, the same bits every run), not cudnnConvolutionBackwardBias.
//
// Limits. cuDNN's legacy descriptors take 32-bit sizes and index with 32 bits, so a batch is
// split into calls of at most 2^31 - 1 elements per tensor (the weight gradient accumulates
// over them with beta = 1); a single image beyond that is an error naming the op.
//
// Errors. Argument checks mirror the CPU kernels' (same QFLOW_CHECK messages, naming conv2d,
// conv2d_relu or conv2d_backward and the shapes); cuDNN failures go through QFLOW_CUDNN_CHECK
// naming the op and the cuDNN call.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.cuh"
#include "kernels/conv_plan.h"
#include "qflow/core/device_runtime.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "src/cuda_ops.h"

namespace qflow::cuda {
namespace {

using conv::Algo;
using conv::Elem;
using conv::Geometry;
using conv::Pass;
using conv::Plan;
using conv::PlanSpec;

constexpr int64_t kMaxCudnnElements = std::numeric_limits<int>::max();

Elem elem_of(DType dt) { return dt == DType::Float32 ? Elem::F32 : Elem::F64; }

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0; }

// cuDNN's scaling factors: float for float data, double for double.
const void* one_of(DType dt) {
  static const float f = 1;
  static const double d = 1;
  return dt == DType::Float32 ? static_cast<const void*>(&f) : static_cast<const void*>(&d);
}
const void* zero_of(DType dt) {
  static const float f = 0;
  static const double d = 0;
  return dt == DType::Float32 ? static_cast<const void*>(&f) : static_cast<const void*>(&d);
}

/// t (3-D (C, H, W) or 4-D) as a 4-D (N, C, H, W) view of the same storage.
Tensor as_4d(const Tensor& t) {
  if (t.dim() == 4) return t;
  const auto& s = t.sizes();
  const auto& st = t.strides();
  std::vector<int64_t> sizes{1, s[0], s[1], s[2]};
  std::vector<int64_t> strides{s[0] * s[1] * s[2], st[0], st[1], st[2]};
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), std::move(sizes), std::move(strides),
                                             t.storage_offset(), t.dtype()));
}

/// A fresh (1, C, H, W) result as (C, H, W) when the op's input was unbatched (same storage).
Tensor unbatch(const Tensor& y, int64_t input_dim) {
  if (input_dim == 4) return y;
  std::vector<int64_t> sizes(y.sizes().begin() + 1, y.sizes().end());
  std::vector<int64_t> strides(y.strides().begin() + 1, y.strides().end());
  return Tensor(std::make_shared<TensorImpl>(y.impl()->storage(), std::move(sizes), std::move(strides),
                                             y.storage_offset(), y.dtype()));
}

/// A 4-D activation in the memory format cuDNN is handed (channels-last for float32, NCHW-
/// contiguous for float64), 16-byte aligned: x4 itself when it already is, else a copy.
Tensor in_format(const Tensor& x4, bool nhwc, cudaStream_t stream, const char* op) {
  if (nhwc) {
    if (is_channels_last(x4) && aligned16(x4)) return x4;
    Tensor out = empty_channels_last(x4.sizes(), x4.dtype(), x4.device());
    if (x4.is_contiguous()) {  // NCHW: per image, (C, H W) → (H W, C)
      const auto& s = x4.sizes();
      conv::launch_transpose(elem_of(x4.dtype()), x4.raw_data(), out.raw_data(), s[0], s[1], s[2] * s[3], stream);
      QFLOW_CUDA_CHECK_LAUNCH(op);
    } else {
      copy_(out, x4);
    }
    return out;
  }
  if (x4.is_contiguous() && aligned16(x4)) return x4;
  Tensor out = empty(x4.sizes(), x4.dtype(), x4.device());
  copy_(out, x4);
  return out;
}

/// Images per cuDNN call: every tensor of a call within 2^31 - 1 elements (Note [cuDNN
/// convolutions]: Limits).
int64_t images_per_call(const Geometry& g, const char* op) {
  const int64_t per_image = std::max<int64_t>({g.c * g.h * g.w, g.o * g.oh * g.ow, 1});
  QFLOW_CHECK(per_image <= kMaxCudnnElements,
              "{}: one image of input [{}, {}, {}] or of output [{}, {}, {}] has more than 2^31 - 1 elements, which "
              "cuDNN's convolutions cannot index",
              op, g.c, g.h, g.w, g.o, g.oh, g.ow);
  return std::max<int64_t>(1, std::min(g.n, kMaxCudnnElements / per_image));
}

PlanSpec spec_for(const Geometry& g, int64_t images, DType dt, Device device, bool nhwc) {
  PlanSpec s;
  s.device = device;
  s.dtype = dt;
  s.nhwc = nhwc;
  s.tf32 = dt == DType::Float32 && allow_tf32();
  s.deterministic = deterministic_algorithms();
  s.g = g;
  s.g.n = images;
  return s;
}

/// One cuDNN call's share of a batch: images [n0, n0 + images) and their plan.
struct Chunk {
  Plan* plan;
  int64_t n0, images;
};

std::vector<Chunk> chunks_of(const Geometry& g, DType dt, Device device, bool nhwc, const char* op) {
  std::vector<Chunk> r;
  const int64_t per_call = images_per_call(g, op);
  for (int64_t n0 = 0; n0 < g.n; n0 += per_call) {
    const int64_t images = std::min(per_call, g.n - n0);
    r.push_back(Chunk{&conv::plan_for(spec_for(g, images, dt, device, nhwc)), n0, images});
  }
  return r;
}

/// An input with no channels or an empty plane (its padding still gives an output): cuDNN's
/// descriptors reject zero sizes, and every output element is an empty sum, so no cuDNN call.
bool empty_input(const Geometry& g) { return g.c == 0 || g.h == 0 || g.w == 0; }

/// Whether this call runs channels-last: float32 does, unless cuDNN has no channels-last
/// algorithm for one of the passes it needs (then NCHW: Note [cuDNN convolutions]).
bool use_nhwc(const Geometry& g, DType dt, Device device, const std::vector<Pass>& passes, const char* op) {
  if (dt != DType::Float32 || g.n == 0 || empty_input(g)) return dt == DType::Float32;
  Plan& plan = conv::plan_for(spec_for(g, std::min(g.n, images_per_call(g, op)), dt, device, true));
  for (Pass p : passes)
    if (!plan.supports(cudnn(device), p)) return false;
  return true;
}

const char* at(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.raw_data()) + elements * static_cast<int64_t>(t.element_size());
}
char* at_mut(const Tensor& t, int64_t elements) {
  return static_cast<char*>(t.raw_data()) + elements * static_cast<int64_t>(t.element_size());
}

void* ws_ptr(const std::shared_ptr<Storage>& ws, size_t bytes) { return bytes ? ws->data() : nullptr; }

/// y = conv(x, w); x, w, y in the plan's format, y written whole.
void run_forward(const Geometry& g, bool nhwc, const Tensor& x, const Tensor& w, const Tensor& y, const char* op) {
  const DType dt = x.dtype();
  const Device dev = x.device();
  cudnnHandle_t h = cudnn(dev);
  const int64_t x_image = g.c * g.h * g.w, y_image = g.o * g.oh * g.ow;
  for (const Chunk& c : chunks_of(g, dt, dev, nhwc, op)) {
    const void* xp = at(x, c.n0 * x_image);
    void* yp = at_mut(y, c.n0 * y_image);
    const Algo algo = c.plan->forward(h, xp, w.raw_data(), yp, op);
    const auto ws = workspace(algo.workspace, dev);
    QFLOW_CUDNN_CHECK(cudnnConvolutionForward(h, one_of(dt), c.plan->x_desc(), xp, c.plan->w_desc(), w.raw_data(),
                                              c.plan->conv_desc(Pass::Forward),
                                              static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo),
                                              ws_ptr(ws, algo.workspace), algo.workspace, zero_of(dt),
                                              c.plan->y_desc(), yp),
                      fmt::format("{}: cudnnConvolutionForward", op).c_str());
  }
}

/// dx = conv_transpose(dy, w), written whole.
void run_backward_data(const Geometry& g, bool nhwc, const Tensor& dy, const Tensor& w, const Tensor& dx,
                       const char* op) {
  const DType dt = dy.dtype();
  const Device dev = dy.device();
  cudnnHandle_t h = cudnn(dev);
  const int64_t x_image = g.c * g.h * g.w, y_image = g.o * g.oh * g.ow;
  for (const Chunk& c : chunks_of(g, dt, dev, nhwc, op)) {
    const void* dyp = at(dy, c.n0 * y_image);
    void* dxp = at_mut(dx, c.n0 * x_image);
    const Algo algo = c.plan->backward_data(h, w.raw_data(), dyp, dxp, op);
    const auto ws = workspace(algo.workspace, dev);
    QFLOW_CUDNN_CHECK(cudnnConvolutionBackwardData(h, one_of(dt), c.plan->w_desc(), w.raw_data(), c.plan->y_desc(), dyp,
                                                   c.plan->conv_desc(Pass::BackwardData),
                                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo),
                                                   ws_ptr(ws, algo.workspace), algo.workspace, zero_of(dt),
                                                   c.plan->x_desc(), dxp),
                      fmt::format("{}: cudnnConvolutionBackwardData", op).c_str());
  }
}

/// dw = sum over the batch of the filter gradient, written whole (g.n > 0).
void run_backward_filter(const Geometry& g, bool nhwc, const Tensor& x, const Tensor& dy, const Tensor& dw,
                         const char* op) {
  const DType dt = x.dtype();
  const Device dev = x.device();
  cudnnHandle_t h = cudnn(dev);
  const int64_t x_image = g.c * g.h * g.w, y_image = g.o * g.oh * g.ow;
  const std::vector<Chunk> chunks = chunks_of(g, dt, dev, nhwc, op);
  // Every chunk's algorithm first: a search writes dw, which must not happen once chunks
  // started accumulating into it.
  std::vector<Algo> algos;
  for (const Chunk& c : chunks)
    algos.push_back(c.plan->backward_filter(h, at(x, c.n0 * x_image), at(dy, c.n0 * y_image), dw.raw_data(), op));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    const Algo& algo = algos[i];
    const auto ws = workspace(algo.workspace, dev);
    QFLOW_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, one_of(dt), c.plan->x_desc(), at(x, c.n0 * x_image),
                                                     c.plan->y_desc(), at(dy, c.n0 * y_image),
                                                     c.plan->conv_desc(Pass::BackwardFilter),
                                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo),
                                                     ws_ptr(ws, algo.workspace), algo.workspace,
                                                     i == 0 ? zero_of(dt) : one_of(dt), c.plan->w_desc(),
                                                     dw.raw_data()),
                      fmt::format("{}: cudnnConvolutionBackwardFilter", op).c_str());
  }
}

/// A dense 4-D activation (N, C, H, W) seen as (outer, channels, inner) for conv.cu's
/// per-channel kernels: channels-last → (N H W, C, 1), NCHW → (N, C, H W).
struct ChannelView {
  int64_t outer, channels, inner;
};
ChannelView channel_view(const Tensor& t4) {
  const auto& s = t4.sizes();
  if (is_channels_last(t4)) return {s[0] * s[2] * s[3], s[1], 1};
  QFLOW_ASSERT(t4.is_contiguous(), "conv: expected a channels-last or contiguous tensor, got strides {}", t4.strides());
  return {s[0], s[1], s[2] * s[3]};
}

// ---- conv2d / conv2d_relu ---------------------------------------------------------------------

template <bool kRelu>
Stack conv2d_cuda(OpArgs& a) {
  const char* op = kRelu ? "conv2d_relu" : "conv2d";
  const Tensor& input = a.tensor("input");
  const Tensor& weight = a.tensor("weight");
  const Geometry g = conv::geometry(input.sizes(), weight.sizes(), a.int_list("stride"), a.int_list("padding"),
                                    a.int_list("dilation"), a.to_int("groups"), op);
  QFLOW_CHECK(is_floating(input.dtype()), "{}: expected a float32 or float64 input, got {}", op, input.dtype());
  QFLOW_CHECK(weight.dtype() == input.dtype(), "{}: weight dtype {} does not match input dtype {}", op, weight.dtype(),
              input.dtype());
  Tensor bias;
  if (a["bias"].is_tensor() && a.tensor("bias").defined()) {
    bias = a.tensor("bias");
    QFLOW_CHECK(bias.sizes() == std::vector<int64_t>{g.o},
                "{}: expected bias of shape [{}] for weight of shape {}, got bias of shape {}", op, g.o, weight.sizes(),
                bias.sizes());
    QFLOW_CHECK(bias.dtype() == input.dtype(), "{}: bias dtype {} does not match input dtype {}", op, bias.dtype(),
                input.dtype());
  }
  const DType dt = input.dtype();
  const Device dev = input.device();
  Launch launch(input);
  const bool nhwc = use_nhwc(g, dt, dev, {Pass::Forward}, op);
  const std::vector<int64_t> y_sizes{g.n, g.o, g.oh, g.ow};
  Tensor y = nhwc ? empty_channels_last(y_sizes, dt, dev) : empty(y_sizes, dt, dev);
  if (g.n > 0) {
    if (empty_input(g)) {
      QFLOW_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), launch.stream), op);
    } else {
      const Tensor x = in_format(as_4d(input), nhwc, launch.stream, op);
      const Tensor w = conv::filter_in_layout(weight, nhwc, launch.stream);
      run_forward(g, nhwc, x, w, y, op);
    }
    if (bias.defined() || kRelu) {
      const Tensor b = bias.defined() && !bias.is_contiguous() ? contiguous(bias) : bias;
      const ChannelView v = channel_view(y);
      conv::launch_bias_act(elem_of(dt), y.raw_data(), b.defined() ? b.raw_data() : nullptr, kRelu, v.outer,
                            v.channels, v.inner, launch.stream);
      QFLOW_CUDA_CHECK_LAUNCH(op);
    }
  }
  return Stack{Value(unbatch(y, input.dim()))};
}

// ---- conv2d_backward --------------------------------------------------------------------------

Stack conv2d_backward_cuda(OpArgs& a) {
  constexpr const char* op = "conv2d_backward";
  const Tensor& gy = a.tensor("grad_output");
  const Tensor& input = a.tensor("input");
  const Tensor& weight = a.tensor("weight");
  const Geometry g = conv::geometry(input.sizes(), weight.sizes(), a.int_list("stride"), a.int_list("padding"),
                                    a.int_list("dilation"), a.to_int("groups"), op);
  QFLOW_CHECK(gy.sizes() == g.output_sizes(),
              "{}: expected grad_output of shape {} (the conv2d output for input of shape {} and weight of shape {}), "
              "got {}",
              op, g.output_sizes(), input.sizes(), weight.sizes(), gy.sizes());
  QFLOW_CHECK(is_floating(input.dtype()), "{}: expected a float32 or float64 input, got {}", op, input.dtype());
  QFLOW_CHECK(weight.dtype() == input.dtype() && gy.dtype() == input.dtype(),
              "{}: grad_output ({}), input ({}) and weight ({}) must have the same dtype", op, gy.dtype(), input.dtype(),
              weight.dtype());
  const bool want_input = a.to_bool("input_grad"), want_weight = a.to_bool("weight_grad"),
             want_bias = a.to_bool("bias_grad");
  const DType dt = input.dtype();
  const Device dev = input.device();
  Launch launch(input);
  std::vector<Pass> passes;
  if (want_input) passes.push_back(Pass::BackwardData);
  if (want_weight) passes.push_back(Pass::BackwardFilter);
  const bool nhwc = use_nhwc(g, dt, dev, passes, op);

  Tensor gx, gw, gb;
  // grad_output in cuDNN's format when a cuDNN pass reads it; the bias gradient reads any
  // dense channels-last or NCHW-contiguous tensor as it is.
  Tensor dy = as_4d(gy);
  const bool no_cudnn = g.n == 0 || empty_input(g);  // every gradient but the bias's is zero or empty
  if (g.n > 0 && ((!no_cudnn && (want_input || want_weight)) || (!is_channels_last(dy) && !dy.is_contiguous())))
    dy = in_format(dy, nhwc, launch.stream, op);

  if (want_input) {
    const std::vector<int64_t> x_sizes{g.n, g.c, g.h, g.w};
    gx = nhwc ? empty_channels_last(x_sizes, dt, dev) : empty(x_sizes, dt, dev);
    if (!no_cudnn) run_backward_data(g, nhwc, dy, conv::filter_in_layout(weight, nhwc, launch.stream), gx, op);
    gx = unbatch(gx, input.dim());
  }

  if (want_weight) {
    gw = empty(weight.sizes(), dt, dev);  // OIHW-contiguous, as the parameter and the CPU's result
    if (no_cudnn) {
      QFLOW_CUDA_CHECK(cudaMemsetAsync(gw.raw_data(), 0, gw.nbytes(), launch.stream), op);
    } else {
      const Tensor x = in_format(as_4d(input), nhwc, launch.stream, op);
      // cuDNN writes the filter layout: OHWI for float32, which is OIHW's memory for 1x1 and
      // depthwise filters; others go through an OHWI buffer.
      const bool direct = !nhwc || is_channels_last(gw);
      const Tensor target = direct ? gw : empty_channels_last(weight.sizes(), dt, dev);
      run_backward_filter(g, nhwc, x, dy, target, op);
      if (!direct) {
        const auto& s = weight.sizes();  // (O, kH kW, C / groups) → (O, C / groups, kH kW)
        conv::launch_transpose(elem_of(dt), target.raw_data(), gw.raw_data(), s[0], s[2] * s[3], s[1], launch.stream);
        QFLOW_CUDA_CHECK_LAUNCH(op);
      }
    }
  }

  if (want_bias) {
    gb = empty({g.o}, dt, dev);
    const ChannelView v = g.n > 0 ? channel_view(dy) : ChannelView{0, g.o, 1};
    const size_t bytes = conv::bias_grad_workspace_bytes(elem_of(dt), v.outer, v.channels, v.inner);
    const auto ws = workspace(bytes, dev);
    conv::launch_bias_grad(elem_of(dt), g.n > 0 ? dy.raw_data() : nullptr, gb.raw_data(), v.outer, v.channels, v.inner,
                           ws_ptr(ws, bytes), launch.stream);
    QFLOW_CUDA_CHECK_LAUNCH(op);
  }
  return Stack{Value(gx), Value(gw), Value(gb)};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/conv_ops.cuda.inc"
