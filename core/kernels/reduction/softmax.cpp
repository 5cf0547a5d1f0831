// softmax and log_softmax along any dim, and their backward ops.
//
// x is seen as (outer, D, inner) with D the softmax dim. When inner == 1 every row is
// contiguous and is handled whole (vectorised over D); otherwise blocks of adjacent inner
// lanes are handled together (vectorised across lanes, stepping over D). Rows / blocks are
// split across threads. Both subtract the row max first, so exp never overflows; log_softmax
// is (x - max) - log(sum), never x - (max + log(sum)), which would round away the small
// difference when |max| is large.
//
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics once Eigen's packet
// math is inlined (GCC bug 105593); the pragma must precede every include (see unary.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow {
namespace kernels {
namespace {

template <typename T> using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T> using Map = Eigen::Map<Arr<T>>;
template <typename T> using CMap = Eigen::Map<const Arr<T>>;

constexpr int64_t kLaneBlock = 256;  // inner lanes handled together when inner > 1

// Row reductions as simd loops (vectorized; plain to read next to the lane-block code).
template <typename T>
T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
template <typename T>
T row_sum(const T* x, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
template <typename T>
T row_dot(const T* x, const T* y, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

struct Geometry {
  int64_t outer = 1, dim = 1, inner = 1;
};

Geometry geometry(const Tensor& x, int64_t dim, std::string_view op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Geometry g;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) g.outer *= x.sizes()[i];
    else if (i == d) g.dim = x.sizes()[i];
    else g.inner *= x.sizes()[i];
  }
  return g;
}

// Calls row(offset) for each contiguous row (inner == 1), or block(offset, lanes) for each
// block of `lanes` adjacent inner positions (inner > 1); offset is the flat index of the
// first element at d = 0.
template <typename Row, typename Block>
void for_each_slice(const Geometry& g, const Row& row, const Block& block) {
  if (g.inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.dim, 1));
    parallel_for(g.outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row(o * g.dim);
    });
    return;
  }
  const int64_t blocks = (g.inner + kLaneBlock - 1) / kLaneBlock;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.dim * std::min(g.inner, kLaneBlock), 1));
  parallel_for(g.outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / blocks, i0 = (u % blocks) * kLaneBlock;
      block(o * g.dim * g.inner + i0, std::min(kLaneBlock, g.inner - i0));
    }
  });
}

// ---- forward ------------------------------------------------------------------------------------

template <typename T, bool Log>
void softmax_forward(const T* x, T* y, const Geometry& g) {
  const int64_t D = g.dim, I = g.inner;
  auto row = [&](int64_t off) {
    CMap<T> xr(x + off, D);
    Map<T> yr(y + off, D);
    const T mx = row_max(x + off, D);
    yr = (xr - mx).exp();
    const T sum = row_sum(y + off, D);
    if constexpr (Log) yr = (xr - mx) - std::log(sum);
    else yr *= T(1) / sum;
  };
  auto block = [&](int64_t off, int64_t n) {
    Arr<T> mx = Arr<T>::Constant(n, -std::numeric_limits<T>::infinity());
    for (int64_t d = 0; d < D; ++d) mx = mx.max(CMap<T>(x + off + d * I, n));
    Arr<T> sum = Arr<T>::Zero(n);
    for (int64_t d = 0; d < D; ++d) {
      Map<T> yd(y + off + d * I, n);
      yd = (CMap<T>(x + off + d * I, n) - mx).exp();
      sum += yd;
    }
    if constexpr (Log) {
      const Arr<T> log_sum = sum.log();
      for (int64_t d = 0; d < D; ++d) Map<T>(y + off + d * I, n) = (CMap<T>(x + off + d * I, n) - mx) - log_sum;
    } else {
      const Arr<T> inv = sum.inverse();
      for (int64_t d = 0; d < D; ++d) Map<T>(y + off + d * I, n) *= inv;
    }
  };
  for_each_slice(g, row, block);
}

std::vector<TensorMeta> softmax_meta_of(const Tensor& x, int64_t dim, std::string_view op) {
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a floating point tensor, got {}", op, x.dtype());
  wrap_dim(dim, x.dim(), op);
  return one(x.sizes(), x.dtype());
}

template <bool Log>
std::vector<TensorMeta> softmax_meta(const OpArgs& a) {
  return softmax_meta_of(a.tensor("self"), a.to_int("dim"), Log ? "log_softmax" : "softmax");
}

// x: any shape → same shape, normalized along `dim`.
template <bool Log>
Stack softmax_kernel(OpArgs& a) {
  constexpr const char* op = Log ? "log_softmax" : "softmax";
  softmax_meta<Log>(a);
  const Tensor x = contiguous(a.tensor("self"));
  const Geometry g = geometry(x, a.to_int("dim"), op);
  Tensor y = new_tensor(x.sizes(), x.dtype());
  if (x.numel() == 0) return out(y);
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_forward<T, Log>(x.data_ptr<T>(), y.data_ptr<T>(), g);
  });
  return out(y);
}

// ---- backward -----------------------------------------------------------------------------------

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
template <typename T, bool Log>
void softmax_backward_impl(const T* dy, const T* y, T* dx, const Geometry& g) {
  const int64_t D = g.dim, I = g.inner;
  auto row = [&](int64_t off) {
    CMap<T> gr(dy + off, D), yr(y + off, D);
    Map<T> xr(dx + off, D);
    if constexpr (Log) xr = gr - yr.exp() * row_sum(dy + off, D);
    else xr = yr * (gr - row_dot(dy + off, y + off, D));
  };
  auto block = [&](int64_t off, int64_t n) {
    Arr<T> acc = Arr<T>::Zero(n);
    for (int64_t d = 0; d < D; ++d) {
      if constexpr (Log) acc += CMap<T>(dy + off + d * I, n);
      else acc += CMap<T>(dy + off + d * I, n) * CMap<T>(y + off + d * I, n);
    }
    for (int64_t d = 0; d < D; ++d) {
      CMap<T> gd(dy + off + d * I, n), yd(y + off + d * I, n);
      if constexpr (Log) Map<T>(dx + off + d * I, n) = gd - yd.exp() * acc;
      else Map<T>(dx + off + d * I, n) = yd * (gd - acc);
    }
  };
  for_each_slice(g, row, block);
}

template <bool Log>
std::vector<TensorMeta> softmax_backward_meta(const OpArgs& a) {
  constexpr const char* op = Log ? "log_softmax_backward" : "softmax_backward";
  const Tensor& g = a.tensor("grad_output");
  const Tensor& y = a.tensor("output");
  QFLOW_CHECK(g.sizes() == y.sizes(), "{}: grad_output has shape {}, expected the output's shape {}", op, g.sizes(),
              y.sizes());
  QFLOW_CHECK(g.dtype() == y.dtype(), "{}: grad_output has dtype {}, expected the output's dtype {}", op, g.dtype(),
              y.dtype());
  return softmax_meta_of(y, a.to_int("dim"), op);
}

template <bool Log>
Stack softmax_backward_kernel(OpArgs& a) {
  constexpr const char* op = Log ? "log_softmax_backward" : "softmax_backward";
  softmax_backward_meta<Log>(a);
  const Tensor dy = contiguous(a.tensor("grad_output"));
  const Tensor y = contiguous(a.tensor("output"));
  const Geometry g = geometry(y, a.to_int("dim"), op);
  Tensor dx = new_tensor(y.sizes(), y.dtype());
  if (y.numel() == 0) return out(dx);
  visit_floating(y.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_backward_impl<T, Log>(dy.data_ptr<T>(), y.data_ptr<T>(), dx.data_ptr<T>(), g);
  });
  return out(dx);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/softmax.toml (Note [One declaration per op]).
#include "core/ops/softmax.inc"
