// 2-D pooling: max_pool2d (+ with_indices), avg_pool2d, adaptive_avg_pool2d and their
// backward ops. Window and divisor rules follow PyTorch's CPU kernels exactly (ceil_mode,
// count_include_pad, NaN propagation in max). Every kernel is parallel over the N * C planes.
// Declared in core/ops/pool.toml (Note [One declaration per op]).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "qflow/core/conv_ops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/parallel.h"
#include "kernels/common/spatial_utils.h"

namespace qflow {
namespace kernels {
namespace {

struct PoolGeometry {
  int64_t n = 1, c = 0, h = 0, w = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
  bool batched = true;

  int64_t planes() const { return n * c; }
  std::vector<int64_t> output_sizes() const {
    if (batched) return {n, c, oh, ow};
    return {c, oh, ow};
  }
};

// PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the
// input or its left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

PoolGeometry input_geometry(const Tensor& x, std::string_view op) {
  check_spatial_input(x.sizes(), x.dtype(), op);
  PoolGeometry g;
  g.batched = x.dim() == 4;
  const size_t b = g.batched ? 1 : 0;
  g.n = g.batched ? x.sizes()[0] : 1;
  g.c = x.sizes()[b];
  g.h = x.sizes()[b + 1];
  g.w = x.sizes()[b + 2];
  QFLOW_CHECK(g.c > 0 && g.h > 0 && g.w > 0, "{}: expected non-empty channel and spatial dims, got input of shape {}", op,
              x.sizes());
  return g;
}

// Window geometry of max_pool2d / avg_pool2d (dilation 1 for avg).
PoolGeometry window_geometry(const Tensor& x, const IntList& kernel, const IntList& stride, const IntList& padding,
                             const IntList& dilation, bool ceil_mode, std::string_view op) {
  PoolGeometry g = input_geometry(x, op);
  std::tie(g.kh, g.kw) = expand_pair(kernel, "kernel_size", op);
  std::tie(g.sh, g.sw) = stride.empty() ? std::pair{g.kh, g.kw} : expand_pair(stride, "stride", op);
  std::tie(g.ph, g.pw) = expand_pair(padding, "padding", op);
  std::tie(g.dh, g.dw) = expand_pair(dilation, "dilation", op);
  QFLOW_CHECK(g.kh > 0 && g.kw > 0, "{}: kernel_size must be positive, got {}", op, kernel);
  QFLOW_CHECK(g.sh > 0 && g.sw > 0, "{}: stride must be positive, got {}", op, stride);
  QFLOW_CHECK(g.dh > 0 && g.dw > 0, "{}: dilation must be positive, got {}", op, dilation);
  QFLOW_CHECK(g.ph >= 0 && g.pw >= 0 && g.ph <= g.kh / 2 && g.pw <= g.kw / 2,
              "{}: padding {} must be non-negative and at most half of kernel_size [{}, {}]", op, padding, g.kh, g.kw);
  g.oh = pooled_size(g.h, g.kh, g.ph, g.sh, g.dh, ceil_mode);
  g.ow = pooled_size(g.w, g.kw, g.pw, g.sw, g.dw, ceil_mode);
  QFLOW_CHECK(g.oh > 0 && g.ow > 0,
              "{}: input of shape {} is too small for kernel_size [{}, {}] (dilation [{}, {}], padding [{}, {}]): the "
              "output would be [{}, {}]",
              op, x.sizes(), g.kh, g.kw, g.dh, g.dw, g.ph, g.pw, g.oh, g.ow);
  return g;
}

// Runs fn(plane) for every (n, c) plane, in parallel when the total work is large enough.
template <typename Fn>
void for_each_plane(const PoolGeometry& g, int64_t work_per_plane, const Fn& fn) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work_per_plane, 1));
  parallel_for(g.planes(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) fn(p);
  });
}

void check_grad_output(const Tensor& gy, const PoolGeometry& g, const Tensor& x, std::string_view op) {
  QFLOW_CHECK(gy.sizes() == g.output_sizes(), "{}: expected grad_output of shape {} for input of shape {}, got {}", op,
              g.output_sizes(), x.sizes(), gy.sizes());
  QFLOW_CHECK(gy.dtype() == x.dtype(), "{}: grad_output dtype {} does not match input dtype {}", op, gy.dtype(), x.dtype());
}

// ---- max_pool2d ---------------------------------------------------------------------------------

PoolGeometry max_geometry(const OpArgs& a, const char* op) {
  return window_geometry(a.tensor("self"), a.int_list("kernel_size"), a.int_list("stride"), a.int_list("padding"),
                         a.int_list("dilation"), a.to_bool("ceil_mode"), op);
}

// x: (P, H, W) → y: (P, Ho, Wo) and, when idx is non-null, the argmax (ih * W + iw) of each
// window. NaN wins, like PyTorch; a window of padding only keeps -inf and its first index.
template <typename T>
void max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx) {
  for_each_plane(g, g.oh * g.ow * g.kh * g.kw, [&](int64_t p) {
    const T* in = x + p * g.h * g.w;
    const int64_t base = p * g.oh * g.ow;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      int64_t h0 = oh * g.sh - g.ph;
      const int64_t h1 = std::min(h0 + (g.kh - 1) * g.dh + 1, g.h);
      while (h0 < 0) h0 += g.dh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t w0 = ow * g.sw - g.pw;
        const int64_t w1 = std::min(w0 + (g.kw - 1) * g.dw + 1, g.w);
        while (w0 < 0) w0 += g.dw;
        int64_t best = h0 * g.w + w0;
        T best_v = -std::numeric_limits<T>::infinity();
        for (int64_t ih = h0; ih < h1; ih += g.dh) {
          for (int64_t iw = w0; iw < w1; iw += g.dw) {
            const T v = in[ih * g.w + iw];
            if (v > best_v || std::isnan(v)) {
              best_v = v;
              best = ih * g.w + iw;
            }
          }
        }
        y[base + oh * g.ow + ow] = best_v;
        if (idx) idx[base + oh * g.ow + ow] = best;
      }
    }
  });
}

Stack max_pool_run(OpArgs& a, const char* op, bool with_indices) {
  const PoolGeometry g = max_geometry(a, op);
  const Tensor& self = a.tensor("self");
  const Tensor x = as_batched(self);
  Tensor y = new_tensor({g.n, g.c, g.oh, g.ow}, self.dtype());
  Tensor idx = with_indices ? new_tensor({g.n, g.c, g.oh, g.ow}, DType::Int64) : Tensor();
  visit_floating(self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_forward<T>(g, x.data_ptr<T>(), y.data_ptr<T>(), with_indices ? idx.data_ptr<int64_t>() : nullptr);
  });
  if (!with_indices) return out(unbatch_like(y, self.dim()));
  return Stack{Value(unbatch_like(y, self.dim())), Value(unbatch_like(idx, self.dim()))};
}

// grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
PoolGeometry max_backward_geometry(const OpArgs& a) {
  constexpr const char* op = "max_pool2d_with_indices_backward";
  const Tensor& x = a.tensor("self");
  const PoolGeometry g = window_geometry(x, a.int_list("kernel_size"), a.int_list("stride"), a.int_list("padding"),
                                         a.int_list("dilation"), a.to_bool("ceil_mode"), op);
  check_grad_output(a.tensor("grad_output"), g, x, op);
  const Tensor& idx = a.tensor("indices");
  QFLOW_CHECK(idx.dtype() == DType::Int64 && idx.sizes() == g.output_sizes(),
              "{}: expected int64 indices of shape {}, got {} indices of shape {}", op, g.output_sizes(), idx.dtype(),
              idx.sizes());
  return g;
}

// ---- avg_pool2d ---------------------------------------------------------------------------------

struct AvgOptions {
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

// avg_pool2d and its backward name these arguments alike.
PoolGeometry avg_geometry(const OpArgs& a, AvgOptions& opt, const char* op) {
  const PoolGeometry g = window_geometry(a.tensor("self"), a.int_list("kernel_size"), a.int_list("stride"),
                                         a.int_list("padding"), {1}, a.to_bool("ceil_mode"), op);
  opt.count_include_pad = a.to_bool("count_include_pad");
  opt.divisor_override = a.optional_int("divisor_override");
  QFLOW_CHECK(!opt.divisor_override || *opt.divisor_override != 0, "{}: divisor_override must not be zero", op);
  return g;
}

// Calls fn(h0, h1, w0, w1, divisor, k) for every output k of a plane: the window clipped to
// the input, and PyTorch's divisor (window size clipped to the padded input, or to the input
// when !count_include_pad).
template <typename Fn>
void for_each_avg_window(const PoolGeometry& g, const AvgOptions& opt, const Fn& fn) {
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const int64_t hs = oh * g.sh - g.ph, he = std::min(hs + g.kh, g.h + g.ph);
    const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(he, g.h);
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      const int64_t ws = ow * g.sw - g.pw, we = std::min(ws + g.kw, g.w + g.pw);
      const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(we, g.w);
      int64_t divisor = (he - hs) * (we - ws);
      if (opt.divisor_override) divisor = *opt.divisor_override;
      else if (!opt.count_include_pad) divisor = (h1 - h0) * (w1 - w0);
      fn(h0, h1, w0, w1, divisor, oh * g.ow + ow);
    }
  }
}

// ---- adaptive_avg_pool2d --------------------------------------------------------------------------

// Window [start, end) of output i when `in` positions are pooled down to `out`.
int64_t adaptive_start(int64_t i, int64_t out, int64_t in) { return (i * in) / out; }
int64_t adaptive_end(int64_t i, int64_t out, int64_t in) { return ((i + 1) * in + out - 1) / out; }

PoolGeometry adaptive_geometry(const Tensor& x, const IntList& output_size, std::string_view op) {
  PoolGeometry g = input_geometry(x, op);
  std::tie(g.oh, g.ow) = expand_pair(output_size, "output_size", op);
  QFLOW_CHECK(g.oh >= 0 && g.ow >= 0, "{}: output_size must be non-negative, got {}", op, output_size);
  return g;
}

// Calls fn(h0, h1, w0, w1, k) for every output k of a plane.
template <typename Fn>
void for_each_adaptive_window(const PoolGeometry& g, const Fn& fn) {
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const int64_t h0 = adaptive_start(oh, g.oh, g.h), h1 = adaptive_end(oh, g.oh, g.h);
    for (int64_t ow = 0; ow < g.ow; ++ow)
      fn(h0, h1, adaptive_start(ow, g.ow, g.w), adaptive_end(ow, g.ow, g.w), oh * g.ow + ow);
  }
}

}  // namespace

// The kernels and shape rules core/ops/pool.toml declares (Note [One declaration per op]).
std::vector<TensorMeta> max_pool2d_meta(const OpArgs& a) {
  return one(max_geometry(a, "max_pool2d").output_sizes(), a.tensor("self").dtype());
}

Stack max_pool2d_kernel(OpArgs& a) { return max_pool_run(a, "max_pool2d", false); }

std::vector<TensorMeta> max_pool2d_with_indices_meta(const OpArgs& a) {
  const auto sizes = max_geometry(a, "max_pool2d_with_indices").output_sizes();
  return {TensorMeta{sizes, a.tensor("self").dtype()}, TensorMeta{sizes, DType::Int64}};
}

Stack max_pool2d_with_indices_kernel(OpArgs& a) { return max_pool_run(a, "max_pool2d_with_indices", true); }

std::vector<TensorMeta> max_pool2d_backward_meta(const OpArgs& a) {
  max_backward_geometry(a);
  return one(a.tensor("self").sizes(), a.tensor("self").dtype());
}

Stack max_pool2d_backward_kernel(OpArgs& a) {
  const PoolGeometry g = max_backward_geometry(a);
  const Tensor& self = a.tensor("self");
  const Tensor gy = as_batched(a.tensor("grad_output"));
  const Tensor idx = as_batched(a.tensor("indices"));
  Tensor gx = new_tensor({g.n, g.c, g.h, g.w}, self.dtype());
  std::atomic<bool> out_of_range{false};  // no throwing inside a parallel region
  visit_floating(self.dtype(), "max_pool2d_with_indices_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* dy = gy.data_ptr<T>();
    const int64_t* id = idx.data_ptr<int64_t>();
    T* dx = gx.data_ptr<T>();
    const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
    for_each_plane(g, hw + ohw, [&](int64_t p) {
      T* plane = dx + p * hw;
      std::fill(plane, plane + hw, T(0));
      for (int64_t k = p * ohw; k < (p + 1) * ohw; ++k) {
        if (id[k] < 0 || id[k] >= hw) {
          out_of_range = true;
          continue;
        }
        plane[id[k]] += dy[k];
      }
    });
  });
  QFLOW_CHECK(!out_of_range, "max_pool2d_with_indices_backward: an index lies outside its input plane of {} x {}", g.h,
              g.w);
  return out(unbatch_like(gx, self.dim()));
}

std::vector<TensorMeta> avg_pool2d_meta(const OpArgs& a) {
  AvgOptions opt;
  return one(avg_geometry(a, opt, "avg_pool2d").output_sizes(), a.tensor("self").dtype());
}

Stack avg_pool2d_kernel(OpArgs& a) {
  AvgOptions opt;
  const PoolGeometry g = avg_geometry(a, opt, "avg_pool2d");
  const Tensor& self = a.tensor("self");
  const Tensor xb = as_batched(self);
  Tensor y = new_tensor({g.n, g.c, g.oh, g.ow}, self.dtype());
  visit_floating(self.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = xb.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for_each_plane(g, g.oh * g.ow * g.kh * g.kw, [&](int64_t p) {
      const T* in = x + p * g.h * g.w;
      T* o = yp + p * g.oh * g.ow;
      for_each_avg_window(g, opt, [&](int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t divisor, int64_t k) {
        T s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += in[ih * g.w + iw];
        o[k] = h0 < h1 && w0 < w1 ? s / static_cast<T>(divisor) : T(0);
      });
    });
  });
  return out(unbatch_like(y, self.dim()));
}

std::vector<TensorMeta> avg_pool2d_backward_meta(const OpArgs& a) {
  AvgOptions opt;
  const PoolGeometry g = avg_geometry(a, opt, "avg_pool2d_backward");
  check_grad_output(a.tensor("grad_output"), g, a.tensor("self"), "avg_pool2d_backward");
  return one(a.tensor("self").sizes(), a.tensor("self").dtype());
}

Stack avg_pool2d_backward_kernel(OpArgs& a) {
  AvgOptions opt;
  const PoolGeometry g = avg_geometry(a, opt, "avg_pool2d_backward");
  const Tensor& self = a.tensor("self");
  check_grad_output(a.tensor("grad_output"), g, self, "avg_pool2d_backward");
  const Tensor gyb = as_batched(a.tensor("grad_output"));
  Tensor gx = new_tensor({g.n, g.c, g.h, g.w}, self.dtype());
  visit_floating(self.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gy = gyb.data_ptr<T>();
    T* dx = gx.data_ptr<T>();
    for_each_plane(g, g.oh * g.ow * g.kh * g.kw + g.h * g.w, [&](int64_t p) {
      T* plane = dx + p * g.h * g.w;
      const T* dy = gy + p * g.oh * g.ow;
      std::fill(plane, plane + g.h * g.w, T(0));
      for_each_avg_window(g, opt, [&](int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t divisor, int64_t k) {
        const T v = dy[k] / static_cast<T>(divisor);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) plane[ih * g.w + iw] += v;
      });
    });
  });
  return out(unbatch_like(gx, self.dim()));
}

std::vector<TensorMeta> adaptive_avg_pool2d_meta(const OpArgs& a) {
  return one(adaptive_geometry(a.tensor("self"), a.int_list("output_size"), "adaptive_avg_pool2d").output_sizes(),
             a.tensor("self").dtype());
}

Stack adaptive_avg_pool2d_kernel(OpArgs& a) {
  const Tensor& self = a.tensor("self");
  const PoolGeometry g = adaptive_geometry(self, a.int_list("output_size"), "adaptive_avg_pool2d");
  const Tensor xb = as_batched(self);
  Tensor y = new_tensor({g.n, g.c, g.oh, g.ow}, self.dtype());
  visit_floating(self.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = xb.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for_each_plane(g, g.h * g.w + g.oh * g.ow, [&](int64_t p) {
      const T* in = x + p * g.h * g.w;
      T* o = yp + p * g.oh * g.ow;
      for_each_adaptive_window(g, [&](int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t k) {
        T s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += in[ih * g.w + iw];
        o[k] = s / static_cast<T>((h1 - h0) * (w1 - w0));
      });
    });
  });
  return out(unbatch_like(y, self.dim()));
}

std::vector<TensorMeta> adaptive_avg_pool2d_backward_meta(const OpArgs& a) {
  const Tensor& self = a.tensor("self");
  input_geometry(self, "adaptive_avg_pool2d_backward");
  const Tensor& gy = a.tensor("grad_output");
  QFLOW_CHECK(gy.dim() == self.dim() && gy.dtype() == self.dtype() &&
                  std::equal(self.sizes().begin(), self.sizes().end() - 2, gy.sizes().begin()),
              "adaptive_avg_pool2d_backward: grad_output of shape {} ({}) does not fit input of shape {} ({})", gy.sizes(),
              gy.dtype(), self.sizes(), self.dtype());
  return one(self.sizes(), self.dtype());
}

Stack adaptive_avg_pool2d_backward_kernel(OpArgs& a) {
  adaptive_avg_pool2d_backward_meta(a);
  const Tensor& self = a.tensor("self");
  const Tensor& gy_in = a.tensor("grad_output");
  const IntList out_size(gy_in.sizes().end() - 2, gy_in.sizes().end());
  const PoolGeometry g = adaptive_geometry(self, out_size, "adaptive_avg_pool2d_backward");
  const Tensor gyb = as_batched(gy_in);
  Tensor gx = new_tensor({g.n, g.c, g.h, g.w}, self.dtype());
  visit_floating(self.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gy = gyb.data_ptr<T>();
    T* dx = gx.data_ptr<T>();
    for_each_plane(g, 2 * g.h * g.w + g.oh * g.ow, [&](int64_t p) {
      T* plane = dx + p * g.h * g.w;
      const T* dy = gy + p * g.oh * g.ow;
      std::fill(plane, plane + g.h * g.w, T(0));
      for_each_adaptive_window(g, [&](int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t k) {
        const T v = dy[k] / static_cast<T>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) plane[ih * g.w + iw] += v;
      });
    });
  });
  return out(unbatch_like(gx, self.dim()));
}

}  // namespace kernels
}  // namespace qflow

// The registration and typed functions of core/ops/pool.toml (Note [One declaration per op]).
#include "core/ops/pool.inc"
