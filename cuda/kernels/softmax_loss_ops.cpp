// CUDA kernels of softmax, log_softmax, softmax_backward, log_softmax_backward, nll_loss,
// nll_loss_backward, cross_entropy, cross_entropy_backward, mse_loss, mse_loss_backward,
// l1_loss and l1_loss_backward (schemas and CPU kernels: core/kernels/reduction/softmax.cpp, loss.cpp).
// The CPU op's shape rule checks the arguments; device code: softmax_loss.cu (Note [Softmax
// and losses on the GPU]).
#include <cstdint>
#include <vector>

#include "kernels/softmax_loss.cuh"
#include "src/cuda_ops.h"
#include "qflow/core/dtype.h"
#include "qflow/core/error.h"
#include "qflow/core/op_args.h"
#include "qflow/core/op_registry.h"

namespace qflow::cuda {
namespace {

sl::Scalar scalar_of(const Tensor& x, const char* op) {
  switch (x.dtype()) {
    case DType::Float32: return sl::Scalar::F32;
    case DType::Float64: return sl::Scalar::F64;
    default: QFLOW_FAIL("{}: no {} kernel for dtype {} (expected float32 or float64)", op, x.device(), x.dtype());
  }
}

std::vector<TensorMeta> check_args(const OpArgs& a, const char* op) { return OpRegistry::instance().get(op).shape(a); }

Tensor contig(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

Tensor workspace(size_t bytes, Device device) {
  return empty({static_cast<int64_t>(bytes > 0 ? bytes : 1)}, DType::UInt8, device);
}

// ---- softmax -------------------------------------------------------------------------------------

struct SoftmaxGeometry {
  int64_t outer = 1, D = 1, inner = 1;
};

// The CPU's geometry: x seen as (outer, D, inner) around the (already checked) dim.
SoftmaxGeometry softmax_geometry(const Tensor& x, int64_t dim) {
  const int64_t nd = x.dim();
  const int64_t d = dim < 0 ? dim + (nd > 0 ? nd : 1) : dim;
  SoftmaxGeometry g;
  for (int64_t i = 0; i < nd; ++i) {
    if (i < d) g.outer *= x.sizes()[i];
    else if (i == d) g.D = x.sizes()[i];
    else g.inner *= x.sizes()[i];
  }
  return g;
}

template <bool Log>
Stack softmax_cuda(OpArgs& a) {
  constexpr const char* op = Log ? "log_softmax" : "softmax";
  check_args(a, op);
  const Tensor x = contig(a.tensor("self"));
  const sl::Scalar s = scalar_of(x, op);
  const SoftmaxGeometry g = softmax_geometry(x, a.to_int("dim"));
  Tensor y = empty(x.sizes(), x.dtype(), x.device());
  Launch launch(x);
  sl::softmax_forward(s, Log, x.raw_data(), y.raw_data(), g.outer, g.D, g.inner, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(y)};
}

template <bool Log>
Stack softmax_backward_cuda(OpArgs& a) {
  constexpr const char* op = Log ? "log_softmax_backward" : "softmax_backward";
  check_args(a, op);
  const Tensor dy = contig(a.tensor("grad_output"));
  const Tensor y = contig(a.tensor("output"));
  const sl::Scalar s = scalar_of(y, op);
  const SoftmaxGeometry g = softmax_geometry(y, a.to_int("dim"));
  Tensor dx = empty(y.sizes(), y.dtype(), y.device());
  Launch launch(y);
  sl::softmax_backward(s, Log, dy.raw_data(), y.raw_data(), dx.raw_data(), g.outer, g.D, g.inner, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(dx)};
}

// ---- class-index losses ----------------------------------------------------------------------------

struct ClassInputs {
  Tensor self, target, weight;
  sl::ClassLoss args;
};

// self: (C), (N, C) or (N, C, d1, ...) made contiguous; target (N, d1, ...) int64 contiguous.
ClassInputs class_inputs(const OpArgs& a, bool cross_entropy, const char* op) {
  ClassInputs r;
  r.self = contig(a.tensor("self"));
  r.target = contig(a.tensor("target"));
  r.weight = a["weight"].is_none() ? Tensor() : contig(a.tensor("weight"));
  sl::ClassLoss& c = r.args;
  c.scalar = scalar_of(r.self, op);
  c.cross_entropy = cross_entropy;
  const auto& sz = r.self.sizes();
  if (r.self.dim() == 1) {
    c.N = 1;
    c.C = sz[0];
    c.S = 1;
  } else {
    c.N = sz[0];
    c.C = sz[1];
    c.S = 1;
    for (size_t d = 2; d < sz.size(); ++d) c.S *= sz[d];
  }
  c.self = r.self.raw_data();
  c.target = static_cast<const int64_t*>(r.target.raw_data());
  c.weight = r.weight.defined() ? r.weight.raw_data() : nullptr;
  c.reduction = static_cast<int>(a.to_int("reduction"));
  c.ignore_index = a.to_int("ignore_index");
  c.smoothing = cross_entropy ? a.to_double("label_smoothing") : 0.0;
  return r;
}

template <bool CrossEntropy>
Stack class_loss_cuda(OpArgs& a) {
  constexpr const char* op = CrossEntropy ? "cross_entropy" : "nll_loss";
  const std::vector<TensorMeta> metas = check_args(a, op);
  ClassInputs in = class_inputs(a, CrossEntropy, op);
  Tensor out = empty(metas[0].sizes, in.self.dtype(), in.self.device());
  const Tensor ws = workspace(sl::class_loss_workspace_bytes(in.args.N * in.args.S), in.self.device());
  in.args.workspace = ws.raw_data();
  Launch launch(in.self);
  sl::class_loss_forward(in.args, out.raw_data(), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(out)};
}

template <bool CrossEntropy>
Stack class_loss_backward_cuda(OpArgs& a) {
  constexpr const char* op = CrossEntropy ? "cross_entropy_backward" : "nll_loss_backward";
  check_args(a, op);
  ClassInputs in = class_inputs(a, CrossEntropy, op);
  const Tensor& g_in = a.tensor("grad_output");
  const Tensor grad = contig(g_in.dtype() == in.self.dtype() ? g_in : g_in.to(in.self.dtype()));
  Tensor dx = empty(in.self.sizes(), in.self.dtype(), in.self.device());
  const Tensor ws = workspace(sl::class_loss_workspace_bytes(in.args.N * in.args.S), in.self.device());
  in.args.workspace = ws.raw_data();
  Launch launch(in.self);
  sl::class_loss_backward(in.args, grad.raw_data(), dx.raw_data(), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(dx)};
}

// ---- mse / l1 --------------------------------------------------------------------------------------

// Tensors walked as flat arrays: as they are when they share one dense layout (a channels-last
// pair stays channels-last), else made contiguous.
std::vector<Tensor> flat_together(std::vector<Tensor> ts) {
  bool same = is_dense(ts[0]);
  for (const Tensor& t : ts) same = same && t.strides() == ts[0].strides() && is_dense(t);
  if (same) return ts;
  for (Tensor& t : ts) t = contig(t);
  return ts;
}

template <bool L1>
Stack pointwise_loss_cuda(OpArgs& a) {
  constexpr const char* op = L1 ? "l1_loss" : "mse_loss";
  const std::vector<TensorMeta> metas = check_args(a, op);
  const std::vector<Tensor> xy = flat_together({a.tensor("self"), a.tensor("target")});
  const sl::Scalar s = scalar_of(xy[0], op);
  const int reduction = static_cast<int>(a.to_int("reduction"));
  const int64_t n = xy[0].numel();
  Tensor out = reduction == 0 ? empty_like_layout(xy[0]) : empty(metas[0].sizes, xy[0].dtype(), xy[0].device());
  const Tensor ws = workspace(sl::pointwise_workspace_bytes(n), xy[0].device());
  Launch launch(xy[0]);
  sl::pointwise_loss_forward(s, L1, xy[0].raw_data(), xy[1].raw_data(), n, reduction, out.raw_data(), ws.raw_data(),
                             launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(out)};
}

template <bool L1>
Stack pointwise_loss_backward_cuda(OpArgs& a) {
  constexpr const char* op = L1 ? "l1_loss_backward" : "mse_loss_backward";
  check_args(a, op);
  const int reduction = static_cast<int>(a.to_int("reduction"));
  const Tensor& self = a.tensor("self");
  const Tensor& g_in = a.tensor("grad_output");
  const Tensor g = g_in.dtype() == self.dtype() ? g_in : g_in.to(self.dtype());
  std::vector<Tensor> ts = reduction == 0 ? flat_together({self, a.tensor("target"), g})
                                          : flat_together({self, a.tensor("target")});
  const Tensor grad = reduction == 0 ? ts[2] : contig(g);
  const sl::Scalar s = scalar_of(ts[0], op);
  Tensor dx = empty_like_layout(ts[0]);
  Launch launch(ts[0]);
  sl::pointwise_loss_backward(s, L1, grad.raw_data(), ts[0].raw_data(), ts[1].raw_data(), dx.raw_data(),
                              ts[0].numel(), reduction, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(dx)};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/softmax_loss_ops.cuda.inc"
