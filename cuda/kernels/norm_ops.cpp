// CUDA kernels of batch_norm, native_batch_norm, native_batch_norm_backward, batch_norm_relu and
// batch_norm_relu_backward (core/kernels/nn/norm.cpp holds the schemas and the CPU kernels). The
// arguments are checked by the CPU op's own shape rule, so both devices accept and refuse the
// same calls with the same messages. Device code: norm.cu (Note [Batch norm on the GPU]).
#include <cstdint>
#include <vector>

#include "kernels/norm.cuh"
#include "src/cuda_ops.h"
#include "qflow/core/dtype.h"
#include "qflow/core/error.h"
#include "qflow/core/op_args.h"
#include "qflow/core/op_registry.h"
#include "qflow/core/storage.h"
#include "qflow/core/tensor_impl.h"

namespace qflow::cuda {
namespace {

Tensor opt(const Value& v) { return v.is_none() ? Tensor() : v.tensor(); }

bn::Scalar scalar_of(const Tensor& x, const char* op) {
  switch (x.dtype()) {
    case DType::Float32: return bn::Scalar::F32;
    case DType::Float64: return bn::Scalar::F64;
    default: QFLOW_FAIL("{}: no {} kernel for dtype {} (expected float32 or float64)", op, x.device(), x.dtype());
  }
}

// The CPU op's shape rule: the same argument checks on both devices.
void check_args(const OpArgs& a, const char* op) {
  OpRegistry::instance().get(op).shape(a);
}

bn::ChannelTensor channel(const Tensor& t) {
  if (!t.defined()) return {};
  return bn::ChannelTensor{t.raw_data(), t.stride(0)};
}

// The input as one of the two layouts the kernels read (Note [Batch norm on the GPU]): a dense
// channels-last 4-D tensor as rows [N*H*W, C]; a contiguous one as planes (N, C, S), or rows
// when S == 1; anything else made contiguous first.
struct Prepared {
  Tensor x;
  bn::Layout layout;
  bool channels_last = false;
};

Prepared prepare(const Tensor& input) {
  Prepared p;
  const auto& s = input.sizes();
  int64_t S = 1;
  for (size_t d = 2; d < s.size(); ++d) S *= s[d];
  p.layout.N = s[0];
  p.layout.C = s[1];
  p.layout.S = S;
  p.layout.R = s[0] * S;
  if (input.dim() == 4 && !input.is_contiguous() && is_channels_last(input) && is_dense(input)) {
    p.x = input;
    p.channels_last = true;
    p.layout.rows = true;
    return p;
  }
  p.x = input.is_contiguous() ? input : input.contiguous();
  p.layout.rows = S == 1;
  return p;
}

// `t` (grad_output, a ReLU's output) in the memory order of the prepared input.
Tensor like_input(const Tensor& t, const Prepared& p) {
  if (p.channels_last) {
    if (t.dim() == 4 && is_channels_last(t) && is_dense(t)) return t;
    Tensor o = empty_channels_last(t.sizes(), t.dtype(), t.device());
    o.copy_(t);
    return o;
  }
  return t.is_contiguous() ? t : t.contiguous();
}

Tensor workspace_for(const Prepared& p, bn::Scalar scalar, Device device) {
  return empty({static_cast<int64_t>(bn::workspace_bytes(p.layout, scalar))}, DType::UInt8, device);
}

void bump(const Tensor& t) {
  if (t.defined()) t.impl()->storage()->bump_version();
}

struct ForwardResult {
  Tensor out, mean, invstd;
};

ForwardResult run_forward(const OpArgs& a, const char* op, bool relu) {
  check_args(a, op);
  const Tensor& input = a.tensor("input");
  const bn::Scalar scalar = scalar_of(input, op);
  const Prepared p = prepare(input);
  const Tensor w = opt(a["weight"]), b = opt(a["bias"]), rm = opt(a["running_mean"]), rv = opt(a["running_var"]);
  ForwardResult r;
  r.out = empty_like_layout(p.x);
  r.mean = empty({p.layout.C}, input.dtype(), input.device());
  r.invstd = empty({p.layout.C}, input.dtype(), input.device());
  const Tensor ws = workspace_for(p, scalar, input.device());
  bn::ForwardArgs f;
  f.layout = p.layout;
  f.scalar = scalar;
  f.x = p.x.raw_data();
  f.y = r.out.raw_data();
  f.weight = channel(w);
  f.bias = channel(b);
  f.running_mean = channel(rm);
  f.running_var = channel(rv);
  f.save_mean = r.mean.raw_data();
  f.save_invstd = r.invstd.raw_data();
  f.training = a.to_bool("training");
  f.relu = relu;
  f.momentum = a.to_double("momentum");
  f.eps = a.to_double("eps");
  f.workspace = ws.raw_data();
  Launch launch(input);
  bn::forward(f, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  if (f.training) {  // the running statistics were written in place
    bump(rm);
    bump(rv);
  }
  return r;
}

Stack batch_norm_cuda(OpArgs& a) { return Stack{Value(run_forward(a, "batch_norm", false).out)}; }
Stack batch_norm_relu_cuda(OpArgs& a) { return Stack{Value(run_forward(a, "batch_norm_relu", true).out)}; }
Stack native_batch_norm_cuda(OpArgs& a) {
  ForwardResult r = run_forward(a, "native_batch_norm", false);
  return Stack{Value(r.out), Value(r.mean), Value(r.invstd)};
}

// grad_out may be undefined (native_batch_norm_backward); relu_out defined for the fused op.
Stack run_backward(const char* op, const Tensor& grad_out, const Tensor& relu_out, const Tensor& input,
                   const Tensor& weight, const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                   const Tensor& save_invstd, const Tensor& grad_mean, const Tensor& grad_invstd, bool train,
                   double eps) {
  const bn::Scalar scalar = scalar_of(input, op);
  const Prepared p = prepare(input);
  const Tensor gy = grad_out.defined() ? like_input(grad_out, p) : Tensor();
  const Tensor ro = relu_out.defined() ? like_input(relu_out, p) : Tensor();
  Tensor gx = empty_like_layout(p.x);
  Tensor gw = empty({p.layout.C}, input.dtype(), input.device());
  Tensor gb = empty({p.layout.C}, input.dtype(), input.device());
  const Tensor ws = workspace_for(p, scalar, input.device());
  bn::BackwardArgs b;
  b.layout = p.layout;
  b.scalar = scalar;
  b.x = p.x.raw_data();
  b.dy = gy.defined() ? gy.raw_data() : nullptr;
  b.relu_out = ro.defined() ? ro.raw_data() : nullptr;
  b.dx = gx.raw_data();
  b.weight = channel(weight);
  b.running_mean = channel(running_mean);
  b.running_var = channel(running_var);
  b.save_mean = channel(save_mean);
  b.save_invstd = channel(save_invstd);
  b.grad_mean = channel(grad_mean);
  b.grad_invstd = channel(grad_invstd);
  b.grad_weight = gw.raw_data();
  b.grad_bias = gb.raw_data();
  b.train = train;
  b.eps = eps;
  b.workspace = ws.raw_data();
  Launch launch(input);
  bn::backward(b, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(op);
  return Stack{Value(gx), Value(gw), Value(gb)};
}

Stack native_batch_norm_backward_cuda(OpArgs& a) {
  constexpr const char* op = "native_batch_norm_backward";
  check_args(a, op);
  return run_backward(op, opt(a["grad_out"]), Tensor(), a.tensor("input"), opt(a["weight"]), opt(a["running_mean"]),
                      opt(a["running_var"]), opt(a["save_mean"]), opt(a["save_invstd"]), opt(a["grad_mean"]),
                      opt(a["grad_invstd"]), a.to_bool("train"), a.to_double("eps"));
}

Stack batch_norm_relu_backward_cuda(OpArgs& a) {
  constexpr const char* op = "batch_norm_relu_backward";
  check_args(a, op);
  return run_backward(op, a.tensor("grad_out"), a.tensor("output"), a.tensor("input"), opt(a["weight"]),
                      opt(a["running_mean"]), opt(a["running_var"]), Tensor(), Tensor(), Tensor(), Tensor(),
                      a.to_bool("train"), a.to_double("eps"));
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/norm_ops.cuda.inc"
