// The CUDA kernels of quant's ops fake_quantize, fake_quantize_backward, quantize
// (quant/src/fake_quantize_kernel.cpp declares them, with the CPU kernels and the shape rules),
// choose_qparams (quant/src/choose_qparams.cpp) and observe_moving_average_
// (quant/src/observe_moving_average.cpp).
// Registered by name: the cuda layer sees no quant header, and the registry joins the two
// whichever static initialiser runs first (Note [Kernels per device]).
//
// Layouts. A per-tensor grid treats every element alike, so a dense input (a channels-last
// activation) is walked in storage order and the output keeps its order (Note [Channels-last on
// the GPU]); a per-channel grid (weights, axis 0) reads the input row-major, as the CPU kernel.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/quantize.cuh"
#include "src/cuda_ops.h"
#include "qflow/core/ops.h"

namespace qflow::cuda {
namespace {

// Element i's channel in storage order (quantize.cuh's Grid), after the CPU op's checks (its
// shape rule: dtypes, the grid's range, the per-channel scale's length against the axis).
quant::Grid grid_of(const OpArgs& a, const char* op, const Tensor& walked) {
  OpRegistry::instance().get(op).shape(a);
  quant::Grid g;
  g.n = walked.numel();
  g.quant_min = a.to_int("quant_min");
  g.quant_max = a.to_int("quant_max");
  const Tensor& scale = a.tensor("scale");
  if (scale.numel() == 1) {
    g.inner = g.n;
    return g;
  }
  const Tensor& self = a.tensor("self");
  int64_t axis = a.to_int("axis");
  if (axis < 0) axis += self.dim();
  g.channels = scale.numel();
  for (int64_t d = axis + 1; d < self.dim(); ++d) g.inner *= self.sizes()[d];
  return g;
}

bool per_tensor(const OpArgs& a) { return a.tensor("scale").numel() == 1; }

// The quantization parameters as contiguous device arrays of the compute type.
Tensor params_as(const Tensor& t, DType dtype) { return t.to(dtype).contiguous(); }

template <typename Fn>
void visit_compute_type(DType dtype, const char* op, Fn&& fn) {
  if (dtype == DType::Float32) fn(float{});
  else if (dtype == DType::Float64) fn(double{});
  else QFLOW_FAIL("{}: expected a float32 or float64 input, got {}", op, dtype);
}

Stack fake_quantize_cuda(OpArgs& a) {
  constexpr const char* op = "fake_quantize";
  const Tensor& self = a.tensor("self");
  const Tensor x = per_tensor(a) && is_dense(self) ? self : self.contiguous();
  const quant::Grid g = grid_of(a, op, x);
  Tensor y = empty_like_layout(x);
  const Tensor s = params_as(a.tensor("scale"), x.dtype()), z = params_as(a.tensor("zero_point"), x.dtype());
  Launch launch(x);
  visit_compute_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    quant::launch_fake_quantize<T>(static_cast<const T*>(x.impl()->data()), static_cast<T*>(y.impl()->data()),
                                   static_cast<const T*>(s.impl()->data()), static_cast<const T*>(z.impl()->data()), g,
                                   launch.stream);
  });
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return {Value(std::move(y))};
}

Stack fake_quantize_backward_cuda(OpArgs& a) {
  constexpr const char* op = "fake_quantize_backward";
  const Tensor& self = a.tensor("self");
  Tensor grad = a.tensor("grad_output").to(self.dtype());
  // Walked together in one storage order: both as they are when a per-tensor grid finds them
  // dense in the same order, else both row-major.
  const bool as_stored = per_tensor(a) && is_dense(self) && is_dense(grad) && self.strides() == grad.strides();
  const Tensor x = as_stored ? self : self.contiguous();
  if (!as_stored) grad = grad.contiguous();
  const quant::Grid g = grid_of(a, op, x);
  Tensor gx = empty_like_layout(x);
  const Tensor s = params_as(a.tensor("scale"), x.dtype()), z = params_as(a.tensor("zero_point"), x.dtype());
  Launch launch(x);
  visit_compute_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    quant::launch_fake_quantize_backward<T>(static_cast<const T*>(grad.impl()->data()),
                                            static_cast<const T*>(x.impl()->data()), static_cast<T*>(gx.impl()->data()),
                                            static_cast<const T*>(s.impl()->data()),
                                            static_cast<const T*>(z.impl()->data()), g, launch.stream);
  });
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return {Value(std::move(gx))};
}

Stack quantize_cuda(OpArgs& a) {
  constexpr const char* op = "quantize";
  const Tensor& self = a.tensor("self");
  const Tensor x = per_tensor(a) && is_dense(self) ? self : self.contiguous();
  const quant::Grid g = grid_of(a, op, x);
  const DType dtype = a.dtype("dtype");
  // quantize runs where a model is deployed, not in a training step: reading the scale back to
  // check it (as the CPU kernel does) costs one synchronisation there.
  const std::vector<double> scales = to_vector<double>(a.tensor("scale"));
  for (size_t c = 0; c < scales.size(); ++c)
    QFLOW_CHECK(scales[c] > 0.0 && std::isfinite(scales[c]),
                "quantize: scale {} (channel {}) has no integer grid (a zero range: keep such a layer in float)",
                scales[c], c);
  Tensor q = empty_like_layout(x, dtype);
  const Tensor s = params_as(a.tensor("scale"), x.dtype()), z = params_as(a.tensor("zero_point"), x.dtype());
  Launch launch(x);
  visit_compute_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.impl()->data());
    const T* ps = static_cast<const T*>(s.impl()->data());
    const T* pz = static_cast<const T*>(z.impl()->data());
    if (dtype == DType::UInt8) quant::launch_quantize<T, uint8_t>(px, static_cast<uint8_t*>(q.impl()->data()), ps, pz, g, launch.stream);
    else if (dtype == DType::Int8) quant::launch_quantize<T, int8_t>(px, static_cast<int8_t*>(q.impl()->data()), ps, pz, g, launch.stream);
    else quant::launch_quantize<T, int32_t>(px, static_cast<int32_t*>(q.impl()->data()), ps, pz, g, launch.stream);
  });
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return {Value(std::move(q))};
}

// The shape rule (quant's) checks shapes and dtypes; the ranges are not read back to be checked
// (see choose_qparams in quant/include/qflow/quant/qparams.h).
Stack choose_qparams_cuda(OpArgs& a) {
  constexpr const char* op = "choose_qparams";
  OpRegistry::instance().get(op).shape(a);
  const Tensor lo = a.tensor("min").contiguous(), hi = a.tensor("max").contiguous();
  const int64_t n = lo.numel(), bits = a.to_int("bits");
  quant::QParamsFormula f;
  f.bits = bits;
  f.symmetric = a.to_bool("symmetric");
  f.cambricon = a.to_bool("cambricon");
  f.quant_max = f.symmetric ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;  // QConfig::quant_max
  Tensor scale = empty_on({n}, DType::Float32, lo.device()), zero_point = empty_on({n}, DType::Float32, lo.device());
  Launch launch(lo);
  quant::launch_choose_qparams(static_cast<const float*>(lo.impl()->data()), static_cast<const float*>(hi.impl()->data()),
                               static_cast<float*>(scale.impl()->data()), static_cast<float*>(zero_point.impl()->data()),
                               n, f, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return {Value(std::move(scale)), Value(std::move(zero_point))};
}

// The shape rule (quant's) checks the buffers; x is read in its storage order when dense.
Stack observe_moving_average_cuda(OpArgs& a) {
  constexpr const char* op = "observe_moving_average_";
  const OpDef& def = OpRegistry::instance().get(op);
  def.shape(a);
  // Float64 statistics (a module converted to double): the CPU kernel, a sequence of ops that
  // runs on any device.
  if (a.tensor("min_val").dtype() != DType::Float32) return def.kernel(a);
  const Tensor& self = a.tensor("self");
  const Tensor x = is_dense(self) ? self : self.contiguous();
  const Tensor& min_val = a.tensor("min_val");
  const Tensor& max_val = a.tensor("max_val");
  const Tensor& count = a.tensor("num_batches_tracked");
  const Tensor& frozen = a.tensor("frozen");
  const float m = static_cast<float>(a.to_double("momentum"));
  Launch launch(x);
  const Tensor part = empty_on({2 * quant::moving_average_partials(x.numel())}, DType::Float32, x.device());
  visit_compute_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    quant::launch_observe_moving_average<T>(
        static_cast<const T*>(x.impl()->data()), x.numel(), static_cast<float*>(part.impl()->data()),
        static_cast<float*>(min_val.impl()->data()), static_cast<float*>(max_val.impl()->data()),
        static_cast<int64_t*>(count.impl()->data()), static_cast<const bool*>(frozen.impl()->data()), m, 1.0f - m,
        a.to_bool("symmetric"), launch.stream);
  });
  QFLOW_CUDA_CHECK_LAUNCH(op);
  for (const Tensor* t : {&min_val, &max_val, &count}) t->impl()->storage()->bump_version();
  return {};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/quantize_ops.cuda.inc"
