// Arithmetic reductions: sum, mean, var, std, logsumexp and sum_to (the inverse of
// broadcasting that autograd uses). Max/min-like reductions are in reduce_minmax.cpp; the
// loops in reduce_loop.h (see Note [Reduction loops]).
#include <cmath>
#include <vector>

#include "kernels/common/channel_loops.h"
#include "kernels/common/kernel_utils.h"
#include "kernels/common/opaque_elementwise.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"
#include "kernels/reduction/reduce_loop.h"
#include "kernels/reduction/reducers.h"

namespace qflow {
namespace kernels {
namespace {

// Sum of integral/bool inputs is int64 (PyTorch); floating sums keep their dtype.
DType sum_dtype(DType t) { return is_floating(t) ? t : DType::Int64; }

void check_floating(const Tensor& x, const char* op) {
  QFLOW_CHECK(is_floating(x.dtype()),
              "{}: expected a floating point input, got {} (convert it first, e.g. x.to(DType::Float32))", op, x.dtype());
}

// x: any shape; out: x reduced over `dims` (contiguous, in dtype `out`), scaled by `scale`.
void sum_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims, double scale = 1.0) {
  const ReducePlan plan = make_reduce_plan(x, dims, /*keep_order=*/false);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    visit_dtype(out.dtype(), [&](auto out_tag) {
      using TOut = typename decltype(out_tag)::type;
      if constexpr (std::is_same_v<TOut, T> || (!std::is_floating_point_v<T> && std::is_same_v<TOut, int64_t>))
        reduce(plan, x.data_ptr<T>(), SumReducer<T, TOut>{out.data_ptr<TOut>(), scale});
      else QFLOW_ASSERT(false, "sum: no {} -> {} reduction", x.dtype(), out.dtype());
    });
  });
}

// ---- sum / mean ---------------------------------------------------------------------------------

std::vector<TensorMeta> sum_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(reduced_shape(x.sizes(), reduction_dims(x, a.int_list("dim"), "sum"), a.to_bool("keepdim")),
             sum_dtype(x.dtype()));
}

// x: any shape → x summed over dims (all when empty).
Stack sum_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto dims = reduction_dims(x, a.int_list("dim"), "sum");
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), sum_dtype(x.dtype()));
  sum_into(o, x, dims);
  return out(o);
}

std::vector<TensorMeta> mean_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  check_floating(x, "mean");
  return one(reduced_shape(x.sizes(), reduction_dims(x, a.int_list("dim"), "mean"), a.to_bool("keepdim")), x.dtype());
}

// Empty reductions give NaN (0 / 0), like PyTorch.
Stack mean_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  check_floating(x, "mean");
  const auto dims = reduction_dims(x, a.int_list("dim"), "mean");
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), x.dtype());
  const int64_t n = make_reduce_plan(x, dims, false).reduce_numel;
  sum_into(o, x, dims, 1.0 / static_cast<double>(n));
  return out(o);
}

// ---- var / std ----------------------------------------------------------------------------------

// Corrected two-pass variance (Chan, Golub & LeVeque): with d = x - mean,
// var = (sum d^2 - (sum d)^2 / n) / (n - ddof); the second term cancels the rounding error of
// the mean, so a large offset (x = 1e4 + noise in float32) costs no precision.
template <typename T>
struct VarReducer {
  struct acc_t {
    double s = 0, s2 = 0, mean = 0;
  };
  using input_t = T;
  const double* means;
  T* out;
  double n, ddof;
  bool take_sqrt;

  acc_t init(int64_t o) const { return {0, 0, means[o]}; }
  void step(acc_t& a, T v, int64_t) const {
    const double d = static_cast<double>(v) - a.mean;
    a.s += d;
    a.s2 += d * d;
  }
  void row(acc_t& a, const T* p, int64_t stride, int64_t n_row, int64_t) const {
    double s[kLanes] = {}, s2[kLanes] = {};
    int64_t i = 0;
    if (stride == 1) {
      for (; i + kLanes <= n_row; i += kLanes)
        for (int l = 0; l < kLanes; ++l) {
          const double d = static_cast<double>(p[i + l]) - a.mean;
          s[l] += d;
          s2[l] += d * d;
        }
    }
    for (; i < n_row; ++i) {
      const double d = static_cast<double>(p[i * stride]) - a.mean;
      s[0] += d;
      s2[0] += d * d;
    }
    a.s += fold_lanes(s);
    a.s2 += fold_lanes(s2);
  }
  void combine(acc_t& a, const acc_t& b) const {
    a.s += b.s;
    a.s2 += b.s2;
  }
  void write(int64_t o, const acc_t& a) const {
    const double m2 = std::max(0.0, a.s2 - a.s * a.s / n);
    const double var = m2 / (n - ddof);  // n <= ddof: NaN/inf like PyTorch
    out[o] = static_cast<T>(take_sqrt ? std::sqrt(var) : var);
  }
};

template <bool Sqrt>
std::vector<TensorMeta> var_meta(const OpArgs& a) {
  const char* op = Sqrt ? "std" : "var";
  const Tensor& x = a.tensor("self");
  check_floating(x, op);
  return one(reduced_shape(x.sizes(), reduction_dims(x, a.int_list("dim"), op), a.to_bool("keepdim")), x.dtype());
}

// x: any shape → var/std over dims; unbiased divides by n - 1 (Bessel), else by n.
template <bool Sqrt>
Stack var_kernel(OpArgs& a) {
  const char* op = Sqrt ? "std" : "var";
  const Tensor& x = a.tensor("self");
  check_floating(x, op);
  const auto dims = reduction_dims(x, a.int_list("dim"), op);
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), x.dtype());
  const ReducePlan plan = make_reduce_plan(x, dims, false);
  const double n = static_cast<double>(plan.reduce_numel);
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> means(static_cast<size_t>(plan.num_outputs));
    reduce(plan, x.data_ptr<T>(), SumReducer<T, double>{means.data(), 1.0 / n});
    reduce(plan, x.data_ptr<T>(),
           VarReducer<T>{means.data(), o.data_ptr<T>(), n, a.to_bool("unbiased") ? 1.0 : 0.0, Sqrt});
  });
  return out(o);
}

// ---- logsumexp ----------------------------------------------------------------------------------

// log(sum(exp(x - m))) + m with m the maximum, so nothing overflows; an all -inf (or empty)
// slice gives -inf, a +inf or NaN maximum is the result itself.
template <typename T>
struct LogSumExpReducer {
  struct acc_t {
    double s = 0;
    T max = 0;
  };
  using input_t = T;
  const T* maxima;
  T* out;

  acc_t init(int64_t o) const { return {0, maxima[o]}; }
  void step(acc_t& a, T v, int64_t) const { a.s += static_cast<double>(std::exp(v - a.max)); }
  void row(acc_t& a, const T* p, int64_t stride, int64_t n, int64_t) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(std::exp(p[i * stride] - a.max));
    a.s += s;
  }
  void combine(acc_t& a, const acc_t& b) const { a.s += b.s; }
  void write(int64_t o, const acc_t& a) const {
    out[o] = std::isfinite(a.max) ? static_cast<T>(static_cast<double>(a.max) + std::log(a.s)) : a.max;
  }
};

// Integral inputs are reduced as float32 (PyTorch promotes them the same way).
DType lse_dtype(DType t) { return is_floating(t) ? t : DType::Float32; }

std::vector<TensorMeta> logsumexp_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  return one(reduced_shape(x.sizes(), reduction_dims(x, a.int_list("dim"), "logsumexp"), a.to_bool("keepdim")),
             lse_dtype(x.dtype()));
}

Stack logsumexp_kernel(OpArgs& a) {
  const Tensor x = cast(a.tensor("self"), lse_dtype(a.tensor("self").dtype()));
  const auto dims = reduction_dims(x, a.int_list("dim"), "logsumexp");
  Tensor o = new_tensor(reduced_shape(x.sizes(), dims, a.to_bool("keepdim")), x.dtype());
  const ReducePlan plan = make_reduce_plan(x, dims, false);
  visit_floating(x.dtype(), "logsumexp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> maxima(static_cast<size_t>(plan.num_outputs));
    reduce(plan, x.data_ptr<T>(), ExtremumReducer<T, true>{maxima.data()});
    reduce(plan, x.data_ptr<T>(), LogSumExpReducer<T>{maxima.data(), o.data_ptr<T>()});
  });
  return out(o);
}

// ---- sum_to -------------------------------------------------------------------------------------

// The dims of x that broadcasting `sizes` to x's shape created or stretched.
std::vector<int64_t> sum_to_dims(const Tensor& x, const std::vector<int64_t>& sizes) {
  const int64_t lead = x.dim() - static_cast<int64_t>(sizes.size());
  QFLOW_CHECK(lead >= 0, "sum_to: a tensor of shape {} cannot be summed to the larger rank shape {}", x.sizes(), sizes);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const int64_t want = sizes[d - lead], have = x.sizes()[d];
    QFLOW_CHECK(want == have || want == 1,
                "sum_to: a tensor of shape {} cannot be summed to shape {} (dimension {}: {} vs {})", x.sizes(), sizes, d,
                have, want);
    if (want != have) dims.push_back(d);
  }
  return dims;
}

std::vector<TensorMeta> sum_to_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto sizes = a.int_list("size");
  sum_to_dims(x, sizes);
  return one(sizes, x.dtype());
}

// x: broadcast of a tensor of shape `sizes` → (sizes), same dtype (a gradient keeps its type).
// Per-channel sums of a channel-blocked (N, C, H, W) tensor, or of the product of two in one
// layout (y defined), into (1, C, 1, 1) or (C, 1, 1): the gradient of a per-channel factor
// (QConvBN's running fold) without leaving the blocked layout (Note [Opaque layouts]) or, for the
// product, writing it. Summed like batch norm's statistics (channel_sums, double across runs).
bool blocked_channel_sum(const Tensor& x, const std::vector<int64_t>& sizes, Tensor& result, const Tensor& y = Tensor()) {
  const OpaqueLayout* l = x.impl()->opaque_layout();
  if (!l || l->channel_block() == 0 || x.dim() != 4 || x.dtype() != DType::Float32) return false;
  if (y.defined() && !same_opaque_layout(x, y)) return false;
  const int64_t C = x.sizes()[1];
  if (sizes != std::vector<int64_t>{1, C, 1, 1} && sizes != std::vector<int64_t>{C, 1, 1}) return false;
  const ChannelLayout cl{x.sizes()[0], C, x.sizes()[2] * x.sizes()[3], l->channel_block()};
  std::vector<double> sums(C, 0.0);
  const float* px = static_cast<const float*>(x.impl()->data());
  if (y.defined()) {
    const float* py = static_cast<const float*>(y.impl()->data());
    channel_sums<1>(cl, {sums.data()}, [px, py](int64_t i, int64_t) { return std::array<float, 1>{px[i] * py[i]}; });
  } else {
    channel_sums<1>(cl, {sums.data()}, [px](int64_t i, int64_t) { return std::array<float, 1>{px[i]}; });
  }
  result = new_tensor(sizes, DType::Float32);
  std::copy(sums.begin(), sums.end(), result.data_ptr<float>());
  return true;
}

// sum_to(self * other, size) with self and other of one shape, which `size` broadcasts to.
std::vector<TensorMeta> mul_sum_to_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  QFLOW_CHECK(x.sizes() == y.sizes() && x.dtype() == y.dtype(),
              "mul_sum_to: expected self and other of one shape and dtype, got {} {} and {} {}", x.sizes(), x.dtype(),
              y.sizes(), y.dtype());
  const auto sizes = a.int_list("size");
  sum_to_dims(x, sizes);
  return one(sizes, x.dtype());
}

Stack mul_sum_to_kernel(OpArgs& a) {
  mul_sum_to_meta(a);
  return out(sum_to(mul(a.tensor("self"), a.tensor("other")), a.int_list("size")));
}

Stack mul_sum_to_blocked_kernel(OpArgs& a) {
  mul_sum_to_meta(a);
  if (Tensor o; blocked_channel_sum(a.tensor("self"), a.int_list("size"), o, a.tensor("other"))) return out(o);
  make_plain_args(a);
  return mul_sum_to_kernel(a);
}

Stack sum_to_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto sizes = a.int_list("size");
  if (x.sizes() == sizes) return out(x);
  const auto dims = sum_to_dims(x, sizes);
  // The kept dims are x's non-reduced dims in order, so the output is contiguous in `sizes`.
  Tensor o = new_tensor(sizes, x.dtype());
  sum_into(o, x, dims);
  return out(o);
}

Stack sum_to_blocked_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto sizes = a.int_list("size");
  if (x.sizes() == sizes) return out(x);
  if (Tensor o; blocked_channel_sum(x, sizes, o)) return out(o);
  make_plain_args(a);
  return sum_to_kernel(a);
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

// Shapes that already match skip the dispatcher: the engine calls this for every gradient.
Tensor sum_to(const Tensor& x, const IntList& sizes) {
  if (x.sizes() == sizes) return x;
  QFLOW_OP_HANDLE("sum_to");
  return call_tensor(op, {{"self", x}, {"size", sizes}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/reduce.toml (Note [One declaration per op]).
#include "core/ops/reduce.inc"
