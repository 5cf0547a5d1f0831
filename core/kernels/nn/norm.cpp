// Batch normalization: batch_norm, native_batch_norm (which also returns its statistics),
// native_batch_norm_backward, and batch norm fused with the ReLU after it (batch_norm_relu and
// its backward).
//
// Note [Batch norm saves no statistics]
// batch_norm is the public op and returns one tensor (so a traced graph holds a plain
// batch_norm node). Its backward needs the batch mean and invstd; rather than hide extra
// outputs, native_batch_norm_backward recomputes them from the saved input with the very
// loop the forward used (bitwise the same values, one extra read of the input: small next
// to the convolutions around a BN). native_batch_norm returns the statistics for callers
// that want them, and its backward uses the saved ones.
//
// Note [Batch norm fused with ReLU]
// relu(batch_norm(x)) is the most common pair in a CNN. batch_norm_relu applies the ReLU as it
// writes the output, and batch_norm_relu_backward masks the incoming gradient with the output
// (> 0, relu's rule) inside the two passes batch norm's backward makes anyway. That saves the
// ReLU's pass and tensor forward, and threshold_backward's pass and tensor backward. Both run
// the unfused code with one more step per element, so fused results equal relu(batch_norm(x))
// and its gradients bit for bit (tests/core/fused_activation_test.cpp).
#include <cmath>
#include <vector>

#include "kernels/common/channel_loops.h"
#include "kernels/common/kernel_utils.h"
#include "kernels/common/opaque_elementwise.h"
#include "kernels/common/relu_fn.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

Tensor opt(const Value& v) { return v.is_none() ? Tensor() : v.tensor(); }

struct BnShape {
  int64_t N = 0, C = 0, S = 1;  // input seen as (N, C, S), S = product of the spatial dims
  int64_t per_channel() const { return N * S; }
};

BnShape bn_shape(const Tensor& x, std::string_view op) {
  QFLOW_CHECK(x.dim() >= 2, "{}: expected an input with at least 2 dims (N, C, ...), got shape {}", op, x.sizes());
  BnShape s{x.sizes()[0], x.sizes()[1], 1};
  for (int64_t d = 2; d < x.dim(); ++d) s.S *= x.sizes()[d];
  return s;
}

void check_channel_tensor(const Tensor& t, const char* what, const Tensor& x, int64_t C, std::string_view op) {
  if (!t.defined()) return;
  QFLOW_CHECK(t.sizes() == std::vector<int64_t>{C}, "{}: {} has shape {}, expected [{}] (the channels of input {})", op,
              what, t.sizes(), C, x.sizes());
  QFLOW_CHECK(t.dtype() == x.dtype(), "{}: {} has dtype {}, expected the input's dtype {}", op, what, t.dtype(), x.dtype());
}

BnShape check_bn_args(const OpArgs& a, std::string_view op) {
  const Tensor& x = a.tensor("input");
  const BnShape s = bn_shape(x, op);
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a floating point input, got {}", op, x.dtype());
  const char* names[] = {"weight", "bias", "running_mean", "running_var"};
  for (const char* name : names) check_channel_tensor(opt(a[name]), name, x, s.C, op);
  const bool has_mean = opt(a["running_mean"]).defined(), has_var = opt(a["running_var"]).defined();
  QFLOW_CHECK(has_mean == has_var, "{}: running_mean and running_var must be given together", op);
  if (a.to_bool("training")) {
    QFLOW_CHECK(s.per_channel() > 1, "{}: expected more than 1 value per channel when training, got input size {}", op,
                x.sizes());
  } else {
    QFLOW_CHECK(has_mean, "{}: running_mean and running_var are required when training=False", op);
  }
  return s;
}

// Per-channel statistics: the mean and the sum of squared deviations from it (two passes, like
// PyTorch, so a large mean does not cancel the variance away), each summed in T over short runs
// and in double across them (channel_sums).
// x: (N, C, S) contiguous.
template <typename T>
void batch_stats(const T* x, const ChannelLayout& l, std::vector<double>& mean, std::vector<double>& sq_dev) {
  mean.assign(l.C, 0.0);
  sq_dev.assign(l.C, 0.0);
  const double m = static_cast<double>(l.N * l.S);
  channel_sums<1>(l, {mean.data()}, [x](int64_t i, int64_t) { return std::array<T, 1>{x[i]}; });
  for (double& v : mean) v /= m;
  // The deviations in T from the mean rounded to T: the pass is as fast as the first, and
  // mean_t differs from the exact mean by half an ulp, which the squares barely see.
  std::vector<T> mean_t(l.padded_channels(), T(0));
  std::copy(mean.begin(), mean.end(), mean_t.begin());
  const T* mu = mean_t.data();
  channel_sums<1>(l, {sq_dev.data()}, [x, mu](int64_t i, int64_t c) {
    const T d = x[i] - mu[c];
    return std::array<T, 1>{d * d};
  });
}

// The memory order of `x` for the per-channel loops: channel-blocked when x is in a blocked
// opaque layout (Note [Opaque layouts]); any other tensor is read plain.
ChannelLayout channel_layout(const Tensor& x, const BnShape& s) {
  const OpaqueLayout* l = x.impl()->opaque_layout();
  return ChannelLayout{s.N, s.C, s.S, l ? l->channel_block() : 0};
}

// `t` laid out like `x` (x plain contiguous or blocked): the gradient meeting its input.
Tensor like_input(const Tensor& t, const Tensor& x) {
  if (!x.impl()->opaque_layout()) {
    t.impl()->make_plain();
    return contiguous(t);
  }
  return joined_to_layout_of(t, x);
}

// A new tensor laid out like `x`.
Tensor new_like_input(const Tensor& x) { return x.impl()->opaque_layout() ? new_opaque_like(x) : new_tensor(x.sizes(), x.dtype()); }

// Raw element pointer: data_ptr() would turn a blocked tensor plain.
template <typename T>
T* raw(const Tensor& t) { return static_cast<T*>(t.impl()->data()); }

// Element c of a (C,) tensor of any stride, as double.
template <typename T>
double at(const Tensor& t, int64_t c) { return static_cast<double>(t.data_ptr<T>()[c * t.stride(0)]); }

// running = (1 - momentum) * running + momentum * batch, in place; bumps the version so a
// saved copy elsewhere notices the write.
template <typename T>
void update_running(const Tensor& running, const std::vector<double>& batch, double momentum) {
  T* p = running.data_ptr<T>();
  const int64_t st = running.stride(0);
  for (size_t c = 0; c < batch.size(); ++c) {
    const int64_t k = static_cast<int64_t>(c) * st;
    p[k] = static_cast<T>((1.0 - momentum) * static_cast<double>(p[k]) + momentum * batch[c]);
  }
  running.impl()->storage()->bump_version();
}

struct BnOutputs {
  Tensor out, mean, invstd;
};

// y = (x - mean) * invstd * weight + bias, computed as x * scale[c] + shift[c]; with `relu`,
// y = relu(that) (Note [Batch norm fused with ReLU]).
template <typename T>
BnOutputs bn_forward(const OpArgs& a, const BnShape& s, bool relu = false) {
  const Tensor x = a.tensor("input").impl()->opaque_layout() ? a.tensor("input") : contiguous(a.tensor("input"));
  const ChannelLayout l = channel_layout(x, s);
  const Tensor w = opt(a["weight"]), b = opt(a["bias"]), rm = opt(a["running_mean"]), rv = opt(a["running_var"]);
  const bool training = a.to_bool("training");
  const double momentum = a.to_double("momentum"), eps = a.to_double("eps");
  const T* px = raw<T>(x);

  std::vector<double> mean, invstd(s.C);
  if (training) {
    std::vector<double> sq_dev;
    batch_stats(px, l, mean, sq_dev);
    const double m = static_cast<double>(s.per_channel());
    for (int64_t c = 0; c < s.C; ++c) invstd[c] = 1.0 / std::sqrt(sq_dev[c] / m + eps);
    if (rm.defined()) {
      for (double& v : sq_dev) v /= (m - 1.0);  // the running estimate uses the unbiased variance
      update_running<T>(rm, mean, momentum);
      update_running<T>(rv, sq_dev, momentum);
    }
  } else {
    mean.resize(s.C);
    for (int64_t c = 0; c < s.C; ++c) {
      mean[c] = at<T>(rm, c);
      invstd[c] = 1.0 / std::sqrt(at<T>(rv, c) + eps);
    }
  }

  BnOutputs o{new_like_input(x), new_tensor({s.C}, x.dtype()), new_tensor({s.C}, x.dtype())};
  std::vector<T> scale(l.padded_channels(), T(0)), shift(l.padded_channels(), T(0));
  for (int64_t c = 0; c < s.C; ++c) {
    const double sc = invstd[c] * (w.defined() ? at<T>(w, c) : 1.0);
    scale[c] = static_cast<T>(sc);
    shift[c] = static_cast<T>((b.defined() ? at<T>(b, c) : 0.0) - mean[c] * sc);
    o.mean.data_ptr<T>()[c] = static_cast<T>(mean[c]);
    o.invstd.data_ptr<T>()[c] = static_cast<T>(invstd[c]);
  }
  T* py = raw<T>(o.out);
  const T* psc = scale.data();
  const T* psh = shift.data();
  if (relu) channel_map(l, [=](int64_t i, int64_t c) { py[i] = relu_fn(px[i] * psc[c] + psh[c]); });
  else channel_map(l, [=](int64_t i, int64_t c) { py[i] = px[i] * psc[c] + psh[c]; });
  return o;
}

// x: (N, C, ...) → (N, C, ...)
std::vector<TensorMeta> batch_norm_meta(const OpArgs& a) {
  check_bn_args(a, "batch_norm");
  return one(a.tensor("input").sizes(), a.tensor("input").dtype());
}

// Opaque inputs other than channel-blocked ones are made plain (Note [Opaque layouts]).
void plain_unless_channel_blocked(const OpArgs& a, std::string_view input) {
  const OpaqueLayout* l = a.tensor(input).impl()->opaque_layout();
  if (l && l->channel_block() == 0) make_plain_args(a);
}

template <bool kRelu>
Stack batch_norm_kernel(OpArgs& a) {
  constexpr const char* op = kRelu ? "batch_norm_relu" : "batch_norm";
  plain_unless_channel_blocked(a, "input");
  const BnShape s = check_bn_args(a, op);
  return visit_floating(a.tensor("input").dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return out(bn_forward<T>(a, s, kRelu).out);
  });
}

std::vector<TensorMeta> batch_norm_relu_meta(const OpArgs& a) {
  check_bn_args(a, "batch_norm_relu");
  return one(a.tensor("input").sizes(), a.tensor("input").dtype());
}

// x: (N, C, ...) → (y: (N, C, ...), mean: (C,), invstd: (C,))
std::vector<TensorMeta> native_batch_norm_meta(const OpArgs& a) {
  const BnShape s = check_bn_args(a, "native_batch_norm");
  const Tensor& x = a.tensor("input");
  return {TensorMeta{x.sizes(), x.dtype()}, TensorMeta{{s.C}, x.dtype()}, TensorMeta{{s.C}, x.dtype()}};
}

Stack native_batch_norm_kernel(OpArgs& a) {
  plain_unless_channel_blocked(a, "input");
  const BnShape s = check_bn_args(a, "native_batch_norm");
  return visit_floating(a.tensor("input").dtype(), "native_batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    BnOutputs o = bn_forward<T>(a, s);
    return Stack{Value(o.out), Value(o.mean), Value(o.invstd)};
  });
}

// ---- backward ----------------------------------------------------------------------------------

std::vector<TensorMeta> bn_backward_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("input");
  const BnShape s = bn_shape(x, "native_batch_norm_backward");
  const Tensor gy = opt(a["grad_out"]);
  QFLOW_CHECK(!gy.defined() || gy.sizes() == x.sizes(),
              "native_batch_norm_backward: grad_output has shape {}, expected the input's shape {}", gy.sizes(), x.sizes());
  const char* names[] = {"weight", "running_mean", "running_var", "save_mean", "save_invstd"};
  for (const char* name : names) check_channel_tensor(opt(a[name]), name, x, s.C, "native_batch_norm_backward");
  check_channel_tensor(opt(a["grad_mean"]), "grad_mean", x, s.C, "native_batch_norm_backward");
  check_channel_tensor(opt(a["grad_invstd"]), "grad_invstd", x, s.C, "native_batch_norm_backward");
  QFLOW_CHECK(a.to_bool("train") || (opt(a["running_mean"]).defined() && opt(a["running_var"]).defined()),
              "native_batch_norm_backward: running_mean and running_var are required when train=False");
  return {TensorMeta{x.sizes(), x.dtype()}, TensorMeta{{s.C}, x.dtype()}, TensorMeta{{s.C}, x.dtype()}};
}

// Training: with xmu = x - mean, M = N * S, per channel
//   dx = w invstd dy - w invstd^3 xmu sum(dy xmu) / M - w invstd sum(dy) / M     (through y)
//        + grad_mean / M - grad_invstd invstd^3 xmu / M                        (through the stats)
// computed as dx = k1 dy + k2 xmu + k3. Eval: dx = w invstd dy (the stats are constants).
// dweight = sum(dy xmu) invstd, dbias = sum(dy) in both modes.
// kMasked: dy is the incoming gradient where relu_out > 0 and 0 elsewhere (the backward of
// batch_norm_relu, Note [Batch norm fused with ReLU]); relu_out is laid out like the input.
template <typename T, bool kMasked = false>
Stack bn_backward(const OpArgs& a, const BnShape& s, const Tensor& relu_out = Tensor()) {
  const Tensor x = a.tensor("input").impl()->opaque_layout() ? a.tensor("input") : contiguous(a.tensor("input"));
  const ChannelLayout l = channel_layout(x, s);
  const Tensor gy_in = opt(a["grad_out"]);
  const Tensor gy = gy_in.defined() ? like_input(gy_in, x) : Tensor();
  const Tensor w = opt(a["weight"]), rm = opt(a["running_mean"]), rv = opt(a["running_var"]);
  const Tensor sm = opt(a["save_mean"]), si = opt(a["save_invstd"]);
  const Tensor gmean = opt(a["grad_mean"]), ginv = opt(a["grad_invstd"]);
  const bool train = a.to_bool("train");
  const double eps = a.to_double("eps"), m = static_cast<double>(s.per_channel());
  const T* px = raw<T>(x);

  std::vector<double> mean(s.C), invstd(s.C);
  if (train && !(sm.defined() && si.defined())) {
    std::vector<double> sq_dev;
    batch_stats(px, l, mean, sq_dev);  // See Note [Batch norm saves no statistics]
    for (int64_t c = 0; c < s.C; ++c) invstd[c] = 1.0 / std::sqrt(sq_dev[c] / m + eps);
  } else {
    for (int64_t c = 0; c < s.C; ++c) {
      mean[c] = train ? at<T>(sm, c) : at<T>(rm, c);
      invstd[c] = train ? at<T>(si, c) : 1.0 / std::sqrt(at<T>(rv, c) + eps);
    }
  }

  std::vector<double> sum_dy(s.C, 0.0), sum_dy_xmu(s.C, 0.0);
  std::vector<T> mean_t(l.padded_channels(), T(0));
  std::copy(mean.begin(), mean.end(), mean_t.begin());
  // The incoming gradient at i, masked by the ReLU's output when fused.
  const T* pmask = kMasked ? raw<T>(relu_out) : nullptr;
  const auto dy = [pmask](const T* pg, int64_t i) {
    if constexpr (kMasked) return pmask[i] > T(0) ? pg[i] : T(0);  // threshold_backward's select
    else return pg[i];
  };
  if (gy.defined()) {
    const T* pg = raw<T>(gy);
    const T* mu = mean_t.data();
    channel_sums<2>(l, {sum_dy.data(), sum_dy_xmu.data()}, [pg, px, mu, dy](int64_t i, int64_t c) {
      const T g = dy(pg, i);
      return std::array<T, 2>{g, g * (px[i] - mu[c])};
    });
  }

  Tensor gx = new_like_input(x), gw = new_tensor({s.C}, x.dtype()), gb = new_tensor({s.C}, x.dtype());
  std::vector<T> k1(l.padded_channels(), T(0)), k2(l.padded_channels(), T(0)), k3(l.padded_channels(), T(0));
  for (int64_t c = 0; c < s.C; ++c) {
    const double wc = w.defined() ? at<T>(w, c) : 1.0, is = invstd[c], is3 = is * is * is;
    gw.data_ptr<T>()[c] = static_cast<T>(sum_dy_xmu[c] * is);
    gb.data_ptr<T>()[c] = static_cast<T>(sum_dy[c]);
    k1[c] = static_cast<T>(gy.defined() ? wc * is : 0.0);
    k2[c] = static_cast<T>(train ? -(wc * sum_dy_xmu[c] + (ginv.defined() ? at<T>(ginv, c) : 0.0)) * is3 / m : 0.0);
    k3[c] = static_cast<T>(train ? (-wc * is * sum_dy[c] + (gmean.defined() ? at<T>(gmean, c) : 0.0)) / m : 0.0);
  }
  T* pgx = raw<T>(gx);
  const T *pk1 = k1.data(), *pk2 = k2.data(), *pk3 = k3.data(), *pmu = mean_t.data();
  if (gy.defined()) {
    const T* pg = raw<T>(gy);
    channel_map(l, [=](int64_t i, int64_t c) { pgx[i] = pk1[c] * dy(pg, i) + pk2[c] * (px[i] - pmu[c]) + pk3[c]; });
  } else {
    channel_map(l, [=](int64_t i, int64_t c) { pgx[i] = pk2[c] * (px[i] - pmu[c]) + pk3[c]; });
  }
  return Stack{Value(gx), Value(gw), Value(gb)};
}

Stack bn_backward_kernel(OpArgs& a) {
  plain_unless_channel_blocked(a, "input");
  bn_backward_meta(a);
  const BnShape s = bn_shape(a.tensor("input"), "native_batch_norm_backward");
  return visit_floating(a.tensor("input").dtype(), "native_batch_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return bn_backward<T>(a, s);
  });
}

Value opt_value(const Tensor& t) { return t.defined() ? Value(t) : Value(); }

const OpSchema& native_backward_schema() {
  static const OpHandle op("native_batch_norm_backward");
  return op.get().schema;
}

// batch_norm_relu_backward's arguments as native_batch_norm_backward's, the statistics left out
// (recomputed from the input).
Stack as_native_backward_args(const OpArgs& a) {
  return named_stack(native_backward_schema(), {{"grad_out", a["grad_out"]}, {"input", a["input"]},
                                                {"weight", a["weight"]}, {"running_mean", a["running_mean"]},
                                                {"running_var", a["running_var"]}, {"train", a["train"]},
                                                {"eps", a["eps"]}});
}

std::vector<TensorMeta> bn_relu_backward_meta(const OpArgs& a) {
  const Tensor &g = a.tensor("grad_out"), &y = a.tensor("output"), &x = a.tensor("input");
  QFLOW_CHECK(g.sizes() == x.sizes() && y.sizes() == x.sizes(),
              "batch_norm_relu_backward: grad_output has shape {} and output has shape {}, expected the input's shape {}",
              g.sizes(), y.sizes(), x.sizes());
  QFLOW_CHECK(g.dtype() == x.dtype() && y.dtype() == x.dtype(),
              "batch_norm_relu_backward: grad_output ({}) and output ({}) must have the input's dtype {}", g.dtype(),
              y.dtype(), x.dtype());
  Stack native = as_native_backward_args(a);
  return bn_backward_meta(OpArgs(native_backward_schema(), native));
}

Stack bn_relu_backward_kernel(OpArgs& a) {
  plain_unless_channel_blocked(a, "input");
  bn_relu_backward_meta(a);
  Stack native = as_native_backward_args(a);
  const Tensor& x = a.tensor("input");
  const BnShape s = bn_shape(x, "batch_norm_relu_backward");
  const Tensor y = like_input(a.tensor("output"), x.impl()->opaque_layout() ? x : contiguous(x));
  return visit_floating(x.dtype(), "batch_norm_relu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return bn_backward<T, true>(OpArgs(native_backward_schema(), native), s, y);
  });
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

namespace {
std::tuple<Tensor, Tensor, Tensor> three(Stack s) {
  return {std::move(s.at(0).tensor()), std::move(s.at(1).tensor()), std::move(s.at(2).tensor())};
}

// batch_norm and batch_norm_relu take the same arguments.
Tensor call_batch_norm(const OpHandle& op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                       double eps) {
  using kernels::opt_value;
  return call_tensor(op, {{"input", input}, {"weight", opt_value(weight)}, {"bias", opt_value(bias)},
                          {"running_mean", opt_value(running_mean)}, {"running_var", opt_value(running_var)},
                          {"training", training}, {"momentum", momentum}, {"eps", eps}});
}
}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  QFLOW_OP_HANDLE("batch_norm");
  return call_batch_norm(op, input, weight, bias, running_mean, running_var, training, momentum, eps);
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps) {
  QFLOW_OP_HANDLE("batch_norm_relu");
  return call_batch_norm(op, input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_relu_backward(const Tensor& grad_output, const Tensor& output,
                                                            const Tensor& input, const Tensor& weight,
                                                            const Tensor& running_mean, const Tensor& running_var,
                                                            bool training, double eps) {
  using kernels::opt_value;
  QFLOW_OP_HANDLE("batch_norm_relu_backward");
  return three(call(op, {{"grad_out", grad_output}, {"output", output}, {"input", input}, {"weight", opt_value(weight)},
                         {"running_mean", opt_value(running_mean)}, {"running_var", opt_value(running_var)},
                         {"train", training}, {"eps", eps}}));
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum, double eps) {
  using kernels::opt_value;
  QFLOW_OP_HANDLE("native_batch_norm");
  return three(call(op, {{"input", input}, {"weight", opt_value(weight)}, {"bias", opt_value(bias)},
                         {"running_mean", opt_value(running_mean)}, {"running_var", opt_value(running_var)},
                         {"training", training}, {"momentum", momentum}, {"eps", eps}}));
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_output, const Tensor& input,
                                                              const Tensor& weight, const Tensor& running_mean,
                                                              const Tensor& running_var, const Tensor& save_mean,
                                                              const Tensor& save_invstd, bool training, double eps,
                                                              const Tensor& grad_mean, const Tensor& grad_invstd) {
  using kernels::opt_value;
  QFLOW_OP_HANDLE("native_batch_norm_backward");
  return three(call(op, {{"grad_out", opt_value(grad_output)}, {"input", input}, {"weight", opt_value(weight)},
                         {"running_mean", opt_value(running_mean)}, {"running_var", opt_value(running_var)},
                         {"save_mean", opt_value(save_mean)}, {"save_invstd", opt_value(save_invstd)},
                         {"train", training}, {"eps", eps}, {"grad_mean", opt_value(grad_mean)},
                         {"grad_invstd", opt_value(grad_invstd)}}));
}

}  // namespace qflow

// The registration and typed functions of core/ops/norm.toml (Note [One declaration per op]).
#include "core/ops/norm.inc"
