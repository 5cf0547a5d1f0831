// CUDA kernels of max_pool2d, max_pool2d_with_indices, max_pool2d_with_indices_backward,
// avg_pool2d, avg_pool2d_backward, adaptive_avg_pool2d and adaptive_avg_pool2d_backward
// (schemas and CPU kernels: core/kernels/nn/pool.cpp). The CPU op's shape rule checks the
// arguments and gives the output sizes; device code: pool.cu (Note [Pooling on the GPU]).
// A channels-last input gives a channels-last output (and gradient); any other layout is read
// through its strides and gives NCHW-contiguous results.
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/pool.cuh"
#include "src/cuda_ops.h"
#include "qflow/core/dtype.h"
#include "qflow/core/error.h"
#include "qflow/core/op_args.h"
#include "qflow/core/op_registry.h"

namespace qflow::cuda {
namespace {

pool::Scalar scalar_of(const Tensor& x, const char* op) {
  switch (x.dtype()) {
    case DType::Float32: return pool::Scalar::F32;
    case DType::Float64: return pool::Scalar::F64;
    default: QFLOW_FAIL("{}: no {} kernel for dtype {} (expected float32 or float64)", op, x.device(), x.dtype());
  }
}

std::vector<TensorMeta> check_args(const OpArgs& a, const char* op) { return OpRegistry::instance().get(op).shape(a); }

std::pair<int64_t, int64_t> pair_of(const IntList& v) { return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]}; }

// Strides of a 3-D (C, H, W) or 4-D (N, C, H, W) tensor as 4-D ones.
pool::Strides4 strides4(const Tensor& t) {
  const auto& s = t.strides();
  if (t.dim() == 3) return {0, s[0], s[1], s[2]};
  return {s[0], s[1], s[2], s[3]};
}

// Whether results for input `x` are written channels-last.
bool channels_last_result(const Tensor& x) {
  return x.dim() == 4 && !x.is_contiguous() && is_channels_last(x) && is_dense(x);
}

// A dense result of `sizes` (3-D or 4-D) in the chosen order.
Tensor new_result(const std::vector<int64_t>& sizes, DType dtype, Device device, bool cl) {
  return cl ? empty_channels_last(sizes, dtype, device) : empty(sizes, dtype, device);
}

pool::Geometry input_geometry(const Tensor& x) {
  pool::Geometry g;
  const auto& s = x.sizes();
  const size_t b = x.dim() == 4 ? 1 : 0;
  g.N = b ? s[0] : 1;
  g.C = s[b];
  g.H = s[b + 1];
  g.W = s[b + 2];
  return g;
}

// kernel/stride/padding/dilation as the CPU's window_geometry reads them (stride [] = kernel).
void window(pool::Geometry& g, const OpArgs& a, bool dilated) {
  std::tie(g.kh, g.kw) = pair_of(a.int_list("kernel_size"));
  const IntList stride = a.int_list("stride");
  std::tie(g.sh, g.sw) = stride.empty() ? std::pair{g.kh, g.kw} : pair_of(stride);
  std::tie(g.ph, g.pw) = pair_of(a.int_list("padding"));
  if (dilated) std::tie(g.dh, g.dw) = pair_of(a.int_list("dilation"));
}

void set_output(pool::Geometry& g, const std::vector<int64_t>& out_sizes) {
  g.OH = out_sizes[out_sizes.size() - 2];
  g.OW = out_sizes[out_sizes.size() - 1];
}

Stack max_pool_run(OpArgs& a, const char* op, bool with_indices) {
  const std::vector<TensorMeta> metas = check_args(a, op);
  const Tensor& self = a.tensor("self");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  window(g, a, true);
  set_output(g, metas[0].sizes);
  const bool cl = channels_last_result(self);
  Tensor y = new_result(metas[0].sizes, self.dtype(), self.device(), cl);
  Tensor idx = with_indices ? new_result(metas[0].sizes, DType::Int64, self.device(), cl) : Tensor();
  Launch launch(self);
  pool::max_forward(s, g, self.raw_data(), strides4(self), y.raw_data(),
                    with_indices ? static_cast<int64_t*>(idx.raw_data()) : nullptr, cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  if (!with_indices) return Stack{Value(y)};
  return Stack{Value(y), Value(idx)};
}

Stack max_pool2d_cuda(OpArgs& a) { return max_pool_run(a, "max_pool2d", false); }
Stack max_pool2d_with_indices_cuda(OpArgs& a) { return max_pool_run(a, "max_pool2d_with_indices", true); }

// Gathers the gradients whose argmax is each input position. Indices are trusted to come from
// max_pool2d_with_indices with the same geometry (the CPU kernel also refuses indices outside
// the plane; here such an index, or one outside its window, contributes nothing, as checking
// would need a copy to the host).
Stack max_pool2d_backward_cuda(OpArgs& a) {
  constexpr const char* op = "max_pool2d_with_indices_backward";
  check_args(a, op);
  const Tensor& self = a.tensor("self");
  const Tensor& gy = a.tensor("grad_output");
  const Tensor& idx = a.tensor("indices");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  window(g, a, true);
  set_output(g, gy.sizes());
  const bool cl = channels_last_result(self);
  Tensor gx = new_result(self.sizes(), self.dtype(), self.device(), cl);
  Launch launch(self);
  pool::max_backward(s, g, gy.raw_data(), strides4(gy), static_cast<const int64_t*>(idx.raw_data()), strides4(idx),
                     gx.raw_data(), cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(gx)};
}

pool::AvgOptions avg_options(const OpArgs& a) {
  pool::AvgOptions o;
  o.count_include_pad = a.to_bool("count_include_pad");
  const std::optional<int64_t> d = a.optional_int("divisor_override");
  o.has_divisor = d.has_value();
  o.divisor = d.value_or(1);
  return o;
}

Stack avg_pool2d_cuda(OpArgs& a) {
  constexpr const char* op = "avg_pool2d";
  const std::vector<TensorMeta> metas = check_args(a, op);
  const Tensor& self = a.tensor("self");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  window(g, a, false);
  set_output(g, metas[0].sizes);
  const bool cl = channels_last_result(self);
  Tensor y = new_result(metas[0].sizes, self.dtype(), self.device(), cl);
  Launch launch(self);
  pool::avg_forward(s, g, avg_options(a), self.raw_data(), strides4(self), y.raw_data(), cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(y)};
}

Stack avg_pool2d_backward_cuda(OpArgs& a) {
  constexpr const char* op = "avg_pool2d_backward";
  check_args(a, op);
  const Tensor& self = a.tensor("self");
  const Tensor& gy = a.tensor("grad_output");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  window(g, a, false);
  set_output(g, gy.sizes());
  const bool cl = channels_last_result(self);
  Tensor gx = new_result(self.sizes(), self.dtype(), self.device(), cl);
  Launch launch(self);
  pool::avg_backward(s, g, avg_options(a), gy.raw_data(), strides4(gy), gx.raw_data(), cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(gx)};
}

Stack adaptive_avg_pool2d_cuda(OpArgs& a) {
  constexpr const char* op = "adaptive_avg_pool2d";
  const std::vector<TensorMeta> metas = check_args(a, op);
  const Tensor& self = a.tensor("self");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  set_output(g, metas[0].sizes);
  const bool cl = channels_last_result(self);
  Tensor y = new_result(metas[0].sizes, self.dtype(), self.device(), cl);
  Launch launch(self);
  pool::adaptive_avg_forward(s, g, self.raw_data(), strides4(self), y.raw_data(), cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(y)};
}

Stack adaptive_avg_pool2d_backward_cuda(OpArgs& a) {
  constexpr const char* op = "adaptive_avg_pool2d_backward";
  check_args(a, op);
  const Tensor& self = a.tensor("self");
  const Tensor& gy = a.tensor("grad_output");
  const pool::Scalar s = scalar_of(self, op);
  pool::Geometry g = input_geometry(self);
  set_output(g, gy.sizes());
  const bool cl = channels_last_result(self);
  Tensor gx = new_result(self.sizes(), self.dtype(), self.device(), cl);
  Launch launch(self);
  pool::adaptive_avg_backward(s, g, gy.raw_data(), strides4(gy), gx.raw_data(), cl, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(gx)};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/pool_ops.cuda.inc"
