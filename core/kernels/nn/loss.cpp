// Losses: nll_loss and cross_entropy over class-index targets, mse_loss and l1_loss, with
// their backward ops. Reductions follow PyTorch's enum (0 none, 1 mean, 2 sum).
//
// Class-index losses see self as (N, C, S) (S = product of the extra dims d1, ...; an
// unbatched (C,) input is N = S = 1) and target as (N, S). Per position i with target t,
// mask m = (t != ignore_index) and class weights w (all ones when absent):
//   nll_i    = -m w_t lsm_t
//   smooth_i = -m sum_c w_c lsm_c
//   loss_i   = (1 - eps) nll_i + (eps / C) smooth_i            (cross_entropy; nll: eps = 0)
// where lsm is log_softmax(self) for cross_entropy and self itself for nll_loss. Mean divides
// the sum by W = sum_i m_i w_{t_i} (PyTorch 1.13 normalizes both terms by it; W = 0 gives nan).
#include <cmath>
#include <vector>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow {
namespace kernels {
namespace {

Tensor opt(const Value& v) { return v.is_none() ? Tensor() : v.tensor(); }

Reduction reduction_of(const Value& v, std::string_view op) {
  const int64_t r = v.to_int();
  QFLOW_CHECK(r >= 0 && r <= 2, "{}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {}", op, r);
  return static_cast<Reduction>(r);
}

// ---- class-index losses -------------------------------------------------------------------------

struct ClassGeom {
  int64_t N = 1, C = 1, S = 1;
  std::vector<int64_t> target_sizes;  // also the shape of the unreduced loss
};

ClassGeom class_geometry(const Tensor& self, const Tensor& target, const Tensor& weight, std::string_view op) {
  QFLOW_CHECK(is_floating(self.dtype()), "{}: expected a floating point input, got {}", op, self.dtype());
  QFLOW_CHECK(self.dim() >= 1, "{}: expected an input of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor", op);
  QFLOW_CHECK(target.dtype() == DType::Int64, "{}: expected target of dtype int64 (class indices), got {}", op,
              target.dtype());
  ClassGeom g;
  if (self.dim() == 1) {
    g.C = self.sizes()[0];
  } else {
    g.N = self.sizes()[0];
    g.C = self.sizes()[1];
    g.target_sizes.push_back(g.N);
    for (int64_t d = 2; d < self.dim(); ++d) {
      g.S *= self.sizes()[d];
      g.target_sizes.push_back(self.sizes()[d]);
    }
  }
  QFLOW_CHECK(target.sizes() == g.target_sizes, "{}: expected target of shape {} for input of shape {}, got target shape {}",
              op, g.target_sizes, self.sizes(), target.sizes());
  if (weight.defined()) {
    QFLOW_CHECK(weight.sizes() == std::vector<int64_t>{g.C}, "{}: weight has shape {}, expected [{}] (one per class)", op,
                weight.sizes(), g.C);
    QFLOW_CHECK(weight.dtype() == self.dtype(), "{}: weight has dtype {}, expected the input's dtype {}", op,
                weight.dtype(), self.dtype());
  }
  return g;
}

// Per position: the weight of its target (0 when ignored); checks the targets' range.
template <typename T>
std::vector<double> target_weights(const Tensor& target, const Tensor& weight, int64_t C, int64_t ignore_index,
                                   std::string_view op) {
  const Tensor t = contiguous(target);
  const int64_t* pt = t.data_ptr<int64_t>();
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t c = pt[i];
    if (c == ignore_index) {
      out[i] = 0.0;
      continue;
    }
    QFLOW_CHECK(c >= 0 && c < C, "{}: target {} is out of bounds for {} classes", op, c, C);
    out[i] = pw ? static_cast<double>(pw[c]) : 1.0;
  }
  return out;
}

double total(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}

struct ClassLossArgs {
  Tensor self, target, weight;
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
  double smoothing = 0.0;
};

// The forward ops and their backward ops name these arguments alike.
ClassLossArgs class_args(const OpArgs& a, bool with_smoothing, std::string_view op) {
  ClassLossArgs r{a.tensor("self"),         a.tensor("target"),
                  opt(a["weight"]),         reduction_of(a["reduction"], op),
                  a.to_int("ignore_index"), 0.0};
  if (with_smoothing) {
    r.smoothing = a.to_double("label_smoothing");
    QFLOW_CHECK(r.smoothing >= 0.0 && r.smoothing <= 1.0, "{}: label_smoothing must be between 0.0 and 1.0, got {}", op,
                r.smoothing);
  }
  return r;
}

// loss_i (see the file comment) from lsm: (N, C, S) contiguous log-probabilities.
template <typename T>
std::vector<double> position_losses(const T* lsm, const ClassGeom& g, const int64_t* target, int64_t ignore_index,
                                    const T* weight, const std::vector<double>& wt, double eps) {
  std::vector<double> loss(static_cast<size_t>(g.N * g.S), 0.0);
  const double smooth_scale = eps / static_cast<double>(g.C);
  parallel_for(g.N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.C * g.S, 1)), [&](int64_t nb, int64_t ne) {
    std::vector<double> smooth(static_cast<size_t>(g.S));
    for (int64_t n = nb; n < ne; ++n) {
      const T* x = lsm + n * g.C * g.S;
      if (eps > 0.0) {  // smooth_s = sum_c w_c lsm[c, s], vectorized over s
        std::fill(smooth.begin(), smooth.end(), 0.0);
        for (int64_t c = 0; c < g.C; ++c) {
          const double wc = weight ? static_cast<double>(weight[c]) : 1.0;
          const T* xc = x + c * g.S;
          double* sm = smooth.data();
#pragma omp simd
          for (int64_t s = 0; s < g.S; ++s) sm[s] += wc * static_cast<double>(xc[s]);
        }
      }
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t i = n * g.S + s;
        const int64_t t = target[i];
        if (t == ignore_index) continue;
        double l = -(1.0 - eps) * wt[i] * static_cast<double>(x[t * g.S + s]);
        if (eps > 0.0) l -= smooth_scale * smooth[s];
        loss[i] = l;
      }
    }
  });
  return loss;
}

template <typename T>
Tensor reduce_losses(const std::vector<double>& loss, double total_weight, Reduction r, const ClassGeom& g, DType dt) {
  if (r == Reduction::None) {
    Tensor o = new_tensor(g.target_sizes, dt);
    T* p = o.data_ptr<T>();
    for (size_t i = 0; i < loss.size(); ++i) p[i] = static_cast<T>(loss[i]);
    return o;
  }
  const double s = total(loss);
  Tensor o = new_tensor({}, dt);
  o.data_ptr<T>()[0] = static_cast<T>(r == Reduction::Sum ? s : s / total_weight);
  return o;
}

std::vector<TensorMeta> class_loss_meta(const OpArgs& a, std::string_view op) {
  const ClassGeom g = class_geometry(a.tensor("self"), a.tensor("target"), opt(a["weight"]), op);
  const Reduction r = reduction_of(a["reduction"], op);
  return one(r == Reduction::None ? g.target_sizes : std::vector<int64_t>{}, a.tensor("self").dtype());
}
std::vector<TensorMeta> nll_meta(const OpArgs& a) { return class_loss_meta(a, "nll_loss"); }
std::vector<TensorMeta> cross_entropy_meta(const OpArgs& a) { return class_loss_meta(a, "cross_entropy"); }

template <bool CrossEntropy>
Stack class_loss_kernel(OpArgs& a) {
  constexpr const char* op = CrossEntropy ? "cross_entropy" : "nll_loss";
  const ClassLossArgs args = class_args(a, CrossEntropy, op);
  const ClassGeom g = class_geometry(args.self, args.target, args.weight, op);
  return visit_floating(args.self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<double> wt = target_weights<T>(args.target, args.weight, g.C, args.ignore_index, op);
    // self is (N, C, ...): the class dim is 1 (0 for an unbatched input).
    const Tensor lsm = CrossEntropy ? log_softmax(args.self, args.self.dim() == 1 ? 0 : 1) : contiguous(args.self);
    const Tensor t = contiguous(args.target);
    const Tensor w = args.weight.defined() ? contiguous(args.weight) : Tensor();
    const std::vector<double> loss = position_losses<T>(lsm.data_ptr<T>(), g, t.data_ptr<int64_t>(), args.ignore_index,
                                                        w.defined() ? w.data_ptr<T>() : nullptr, wt, args.smoothing);
    return out(reduce_losses<T>(loss, total(wt), args.reduction, g, args.self.dtype()));
  });
}

// ---- class-index backward -----------------------------------------------------------------------

// Arguments: grad_output, self, target, weight?, reduction, ignore_index[, label_smoothing].
// Per position, coef_i = m_i * (grad_i for none, grad for sum, grad / W for mean). Then
//   nll:           dx[c] = -coef w_t [c == t]
//   cross_entropy: dx[c] = coef ((1 - eps) w_t (p_c - [c == t]) + (eps / C) (p_c sum_k w_k - w_c))
// with p = softmax(self) over the class dim.
template <bool CrossEntropy>
std::vector<TensorMeta> class_backward_meta(const OpArgs& a) {
  constexpr const char* op = CrossEntropy ? "cross_entropy_backward" : "nll_loss_backward";
  const ClassGeom g = class_geometry(a.tensor("self"), a.tensor("target"), opt(a["weight"]), op);
  const Reduction r = reduction_of(a["reduction"], op);
  const Tensor& grad = a.tensor("grad_output");
  const std::vector<int64_t> expected = r == Reduction::None ? g.target_sizes : std::vector<int64_t>{};
  QFLOW_CHECK(grad.sizes() == expected, "{}: grad_output has shape {}, expected {}", op, grad.sizes(), expected);
  return one(a.tensor("self").sizes(), a.tensor("self").dtype());
}

template <typename T>
std::vector<double> position_coefs(const Tensor& grad, const std::vector<double>& wt, const int64_t* target,
                                   int64_t ignore_index, Reduction r) {
  const Tensor gc = contiguous(grad.to(dtype_v<T>));
  const T* pg = gc.data_ptr<T>();
  std::vector<double> coef(wt.size());
  const double scale = r == Reduction::Mean ? 1.0 / total(wt) : 1.0;
  for (size_t i = 0; i < wt.size(); ++i) {
    const double gi = r == Reduction::None ? static_cast<double>(pg[i]) : static_cast<double>(pg[0]) * scale;
    coef[i] = target[i] == ignore_index ? 0.0 : gi;
  }
  return coef;
}

template <bool CrossEntropy>
Stack class_backward_kernel(OpArgs& a) {
  constexpr const char* op = CrossEntropy ? "cross_entropy_backward" : "nll_loss_backward";
  class_backward_meta<CrossEntropy>(a);
  const ClassLossArgs args = class_args(a, CrossEntropy, op);
  const ClassGeom g = class_geometry(args.self, args.target, args.weight, op);
  return visit_floating(args.self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<double> wt = target_weights<T>(args.target, args.weight, g.C, args.ignore_index, op);
    const Tensor t = contiguous(args.target);
    const int64_t* pt = t.data_ptr<int64_t>();
    const std::vector<double> coef =
        position_coefs<T>(a.tensor("grad_output"), wt, pt, args.ignore_index, args.reduction);
    const Tensor w = args.weight.defined() ? contiguous(args.weight) : Tensor();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    const double eps = args.smoothing, k = eps / static_cast<double>(g.C);
    double w_sum = static_cast<double>(g.C);
    if (pw) {
      w_sum = 0.0;
      for (int64_t c = 0; c < g.C; ++c) w_sum += static_cast<double>(pw[c]);
    }
    Tensor dx = CrossEntropy ? softmax(args.self, args.self.dim() == 1 ? 0 : 1) : zeros(args.self.sizes(), args.self.dtype());
    T* px = dx.data_ptr<T>();
    parallel_for(g.N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.C * g.S, 1)), [&](int64_t nb, int64_t ne) {
      for (int64_t n = nb; n < ne; ++n) {
        T* x = px + n * g.C * g.S;
        const double* cf = coef.data() + n * g.S;
        const double* wn = wt.data() + n * g.S;
        if constexpr (CrossEntropy) {  // dx = p * A_s - coef_s * k * w_c, then the target term
          for (int64_t c = 0; c < g.C; ++c) {
            const double wc = pw ? static_cast<double>(pw[c]) : 1.0;
            T* xc = x + c * g.S;
#pragma omp simd
            for (int64_t s = 0; s < g.S; ++s)
              xc[s] = static_cast<T>(cf[s] * (static_cast<double>(xc[s]) * ((1.0 - eps) * wn[s] + k * w_sum) - k * wc));
          }
        }
        for (int64_t s = 0; s < g.S; ++s) {
          const int64_t tc = pt[n * g.S + s];
          if (tc == args.ignore_index) continue;
          x[tc * g.S + s] -= static_cast<T>(cf[s] * (1.0 - eps) * wn[s]);
        }
      }
    });
    return out(dx);
  });
}

// ---- regression losses --------------------------------------------------------------------------

enum class Pointwise { Mse, L1 };
constexpr const char* pointwise_name(Pointwise k) { return k == Pointwise::Mse ? "mse_loss" : "l1_loss"; }

void check_pair(const Tensor& x, const Tensor& y, std::string_view op) {
  QFLOW_CHECK(x.sizes() == y.sizes(), "{}: input shape {} and target shape {} differ", op, x.sizes(), y.sizes());
  QFLOW_CHECK(is_floating(x.dtype()) && x.dtype() == y.dtype(),
              "{}: expected input and target of the same floating dtype, got {} and {}", op, x.dtype(), y.dtype());
}

template <Pointwise K>
std::vector<TensorMeta> pointwise_meta(const OpArgs& a) {
  check_pair(a.tensor("self"), a.tensor("target"), pointwise_name(K));
  const Reduction r = reduction_of(a["reduction"], pointwise_name(K));
  return one(r == Reduction::None ? a.tensor("self").sizes() : std::vector<int64_t>{}, a.tensor("self").dtype());
}

template <Pointwise K, typename T>
T pointwise_value(T d) {
  if constexpr (K == Pointwise::Mse) return d * d;
  else return d < T(0) ? -d : d;
}

// Sum of f(i) over [0, n) in double: fixed-size chunks reduced in parallel, partials added
// in order, so the result does not depend on the thread count.
template <typename F>
double chunked_sum(int64_t n, const F& f) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, std::max<int64_t>(1, kParallelGrain / kChunk), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      double s = 0.0;
      const int64_t lo = k * kChunk, hi = std::min(n, lo + kChunk);
#pragma omp simd reduction(+ : s)
      for (int64_t i = lo; i < hi; ++i) s += f(i);
      partial[k] = s;
    }
  });
  return total(partial);
}

template <Pointwise K>
Stack pointwise_kernel(OpArgs& a) {
  const TensorMeta m = pointwise_meta<K>(a)[0];
  const Tensor x = contiguous(a.tensor("self")), y = contiguous(a.tensor("target"));
  const Reduction r = reduction_of(a["reduction"], pointwise_name(K));
  Tensor o = new_tensor(m.sizes, m.dtype);
  visit_floating(m.dtype, pointwise_name(K), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    const T* py = y.data_ptr<T>();
    T* po = o.data_ptr<T>();
    const int64_t n = x.numel();
    if (r == Reduction::None) {
      parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) po[i] = pointwise_value<K>(px[i] - py[i]);
      });
      return;
    }
    const double s = chunked_sum(n, [=](int64_t i) { return static_cast<double>(pointwise_value<K>(px[i] - py[i])); });
    po[0] = static_cast<T>(r == Reduction::Sum ? s : s / static_cast<double>(n));
  });
  return out(o);
}

// Arguments: grad_output, self, target, reduction. d/dself: mse 2 (x - y), l1 sign(x - y),
// times grad (per element for none; grad / numel for mean).
template <Pointwise K>
std::vector<TensorMeta> pointwise_backward_meta(const OpArgs& a) {
  const std::string op = std::string(pointwise_name(K)) + "_backward";
  check_pair(a.tensor("self"), a.tensor("target"), op);
  const Reduction r = reduction_of(a["reduction"], op);
  const std::vector<int64_t> expected = r == Reduction::None ? a.tensor("self").sizes() : std::vector<int64_t>{};
  QFLOW_CHECK(a.tensor("grad_output").sizes() == expected, "{}: grad_output has shape {}, expected {}", op,
              a.tensor("grad_output").sizes(), expected);
  return one(a.tensor("self").sizes(), a.tensor("self").dtype());
}

template <Pointwise K>
Stack pointwise_backward_kernel(OpArgs& a) {
  pointwise_backward_meta<K>(a);
  const Tensor x = contiguous(a.tensor("self")), y = contiguous(a.tensor("target"));
  const Reduction r = reduction_of(a["reduction"], pointwise_name(K));
  Tensor dx = new_tensor(x.sizes(), x.dtype());
  visit_floating(x.dtype(), pointwise_name(K), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor g = contiguous(a.tensor("grad_output").to(dtype_v<T>));
    const T* px = x.data_ptr<T>();
    const T* py = y.data_ptr<T>();
    const T* pg = g.data_ptr<T>();
    T* pd = dx.data_ptr<T>();
    const int64_t n = x.numel();
    const T scalar = r == Reduction::None ? T(0) : (r == Reduction::Mean ? pg[0] / static_cast<T>(n) : pg[0]);
    auto slope = [](T d) {
      if constexpr (K == Pointwise::Mse) return T(2) * d;
      else return static_cast<T>((T(0) < d) - (d < T(0)));
    };
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
      if (r == Reduction::None) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) pd[i] = slope(px[i] - py[i]) * pg[i];
      } else {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) pd[i] = slope(px[i] - py[i]) * scalar;
      }
    });
  });
  return out(dx);
}

Value opt_value(const Tensor& t) { return t.defined() ? Value(t) : Value(); }
int64_t red(Reduction r) { return static_cast<int64_t>(r); }

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------

using kernels::opt_value;
using kernels::red;

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight, Reduction reduction, int64_t ignore_index) {
  QFLOW_OP_HANDLE("nll_loss");
  return call_tensor(op, {{"self", self}, {"target", target}, {"weight", opt_value(weight)},
                          {"reduction", red(reduction)}, {"ignore_index", ignore_index}});
}
Tensor cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  QFLOW_OP_HANDLE("cross_entropy");
  return call_tensor(op, {{"self", self}, {"target", target}, {"weight", opt_value(weight)},
                          {"reduction", red(reduction)}, {"ignore_index", ignore_index},
                          {"label_smoothing", label_smoothing}});
}
Tensor mse_loss(const Tensor& self, const Tensor& target, Reduction reduction) {
  QFLOW_OP_HANDLE("mse_loss");
  return call_tensor(op, {{"self", self}, {"target", target}, {"reduction", red(reduction)}});
}
Tensor l1_loss(const Tensor& self, const Tensor& target, Reduction reduction) {
  QFLOW_OP_HANDLE("l1_loss");
  return call_tensor(op, {{"self", self}, {"target", target}, {"reduction", red(reduction)}});
}
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const Tensor& weight,
                         Reduction reduction, int64_t ignore_index) {
  QFLOW_OP_HANDLE("nll_loss_backward");
  return call_tensor(op, {{"grad_output", grad_output}, {"self", self}, {"target", target},
                          {"weight", opt_value(weight)}, {"reduction", red(reduction)}, {"ignore_index", ignore_index}
                         });
}
Tensor cross_entropy_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const Tensor& weight,
                              Reduction reduction, int64_t ignore_index, double label_smoothing) {
  QFLOW_OP_HANDLE("cross_entropy_backward");
  return call_tensor(op, {{"grad_output", grad_output}, {"self", self}, {"target", target},
                          {"weight", opt_value(weight)}, {"reduction", red(reduction)}, {"ignore_index", ignore_index},
                          {"label_smoothing", label_smoothing}});
}
Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, Reduction reduction) {
  QFLOW_OP_HANDLE("mse_loss_backward");
  return call_tensor(op,
                     {{"grad_output", grad_output}, {"self", self}, {"target", target}, {"reduction", red(reduction)}});
}
Tensor l1_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, Reduction reduction) {
  QFLOW_OP_HANDLE("l1_loss_backward");
  return call_tensor(op,
                     {{"grad_output", grad_output}, {"self", self}, {"target", target}, {"reduction", red(reduction)}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/loss.toml (Note [One declaration per op]).
#include "core/ops/loss.inc"
