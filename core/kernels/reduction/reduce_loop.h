#pragma once
// The loop every reduction runs on. See Note [Reduction loops].
//
// Note [Reduction loops]
// A reduction of x over a set of dims sees x as (kept dims) x (reduced dims): the kept dims
// in logical order (the output is contiguous in that order), the reduced dims either in
// logical order (index-tracking reductions report positions in that order) or sorted so the
// smallest stride is innermost; each group is collapsed where memory allows. A Reducer
// supplies the arithmetic:
//
//   using input_t = T;  using acc_t = ...;
//   acc_t init(int64_t o) const;                  // identity of output o (may carry context)
//   void row(acc_t&, const T* p, int64_t stride, int64_t n, int64_t idx0) const;
//   void step(acc_t&, T v, int64_t idx) const;    // one element
//   void combine(acc_t& a, const acc_t& b) const;  // b follows a in reduction order
//   void write(int64_t o, const acc_t&) const;     // final value of output o
//
// `idx` is the position in the (flattened) reduced range. Three schedules:
//  * horizontal: one output at a time, whole rows of the innermost reduced dim go to row(),
//    which the reducers vectorise with independent lanes (and accumulate float in double);
//  * vertical: when the innermost kept dim is contiguous and the reduced dims are not (sum
//    over the batch of an (N, C) tensor), a block of adjacent outputs is accumulated
//    together, step() over contiguous columns, which vectorises across outputs;
//  * split: few outputs and a long reduced range (sum of everything): the range is cut
//    into fixed-size chunks reduced in parallel into per-chunk partials, combined in order.
// Outputs are spread over threads otherwise. Chunk sizes depend only on the shape, never on
// the thread count, so results are bitwise reproducible for any number of threads.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "qflow/core/parallel.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels {

struct ReducePlan {
  int64_t num_outputs = 1;   // product of the kept sizes
  int64_t reduce_numel = 1;  // product of the reduced sizes
  // Collapsed kept dims (never empty): sizes and input strides, outermost first.
  std::vector<int64_t> out_sizes, out_strides;
  // Collapsed reduced dims (never empty): sizes and input strides, outermost first.
  std::vector<int64_t> red_sizes, red_strides;
};

/// Plans reducing `x` over `dims` (wrapped, sorted, unique). keep_order: reduced positions
/// are counted in logical row-major order (needed by argmax and friends).
ReducePlan make_reduce_plan(const Tensor& x, const std::vector<int64_t>& dims, bool keep_order);

/// Wraps `dims` of op (empty = all dims; a 0-d tensor reduces over nothing) into a sorted,
/// unique list; errors name the op, the dim and the tensor's rank.
std::vector<int64_t> reduction_dims(const Tensor& x, const std::vector<int64_t>& dims, std::string_view op);
/// Output shape of reducing `sizes` over `dims` (wrapped, sorted).
std::vector<int64_t> reduced_shape(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool keepdim);

namespace detail {

/// Walks the row-major positions of a strided index space, tracking the memory offset.
/// Allocation-free up to kInline dims: one is made per output on hot paths.
class Odometer {
 public:
  Odometer(const int64_t* sizes, const int64_t* strides, int64_t ndim) : sizes_(sizes), strides_(strides), ndim_(ndim) {
    if (ndim > kInline) heap_.resize(static_cast<size_t>(ndim));
    idx_ = ndim > kInline ? heap_.data() : inline_;
    std::fill(idx_, idx_ + ndim, int64_t{0});
  }
  Odometer(const Odometer&) = delete;
  Odometer& operator=(const Odometer&) = delete;

  void seek(int64_t flat) {
    offset_ = 0;
    for (int64_t d = ndim_ - 1; d >= 0; --d) {
      idx_[d] = flat % sizes_[d];
      flat /= sizes_[d];
      offset_ += idx_[d] * strides_[d];
    }
  }
  void next() {
    for (int64_t d = ndim_ - 1; d >= 0; --d) {
      offset_ += strides_[d];
      if (++idx_[d] < sizes_[d]) return;
      offset_ -= idx_[d] * strides_[d];
      idx_[d] = 0;
    }
  }
  int64_t offset() const { return offset_; }

 private:
  static constexpr int64_t kInline = 8;
  const int64_t* sizes_;
  const int64_t* strides_;
  int64_t ndim_;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;
  int64_t* idx_;
  int64_t offset_ = 0;
};

inline constexpr int64_t kVerticalBlock = 256;  // outputs accumulated together (fits L1)
inline constexpr int64_t kSplitMaxOutputs = 64;
inline constexpr int64_t kSplitChunkWork = 32768;
inline constexpr int64_t kSplitMaxChunks = 1024;

// Calls seg(offset, n, pos) for the runs of the innermost reduced dim that cover reduced
// positions [rb, re): `offset` is relative to an output's first input element, `pos` is the
// position of the run's first element.
template <typename Seg>
void for_each_segment(const ReducePlan& plan, int64_t rb, int64_t re, const Seg& seg) {
  const int64_t nd = static_cast<int64_t>(plan.red_sizes.size());
  const int64_t inner = plan.red_sizes.back(), stride = plan.red_strides.back();
  Odometer rows(plan.red_sizes.data(), plan.red_strides.data(), nd - 1);
  rows.seek(rb / inner);
  int64_t col = rb % inner;
  for (int64_t pos = rb; pos < re;) {
    const int64_t n = std::min(inner - col, re - pos);
    seg(rows.offset() + col * stride, n, pos);
    pos += n;
    col = 0;
    rows.next();
  }
}

// Reduced positions [rb, re) of the output whose first input element is `p`, in rows.
template <typename R>
void accumulate_rows(const ReducePlan& plan, const typename R::input_t* p, int64_t rb, int64_t re,
                     typename R::acc_t& acc, const R& r) {
  const int64_t stride = plan.red_strides.back();
  for_each_segment(plan, rb, re, [&](int64_t off, int64_t n, int64_t pos) { r.row(acc, p + off, stride, n, pos); });
}

// Reduced positions [rb, re) of `k` adjacent outputs (contiguous in the input from `p`).
template <typename R>
void accumulate_block(const ReducePlan& plan, const typename R::input_t* p, int64_t k, int64_t rb, int64_t re,
                      typename R::acc_t* acc, const R& r) {
  Odometer red(plan.red_sizes.data(), plan.red_strides.data(), static_cast<int64_t>(plan.red_sizes.size()));
  red.seek(rb);
  for (int64_t pos = rb; pos < re; ++pos, red.next()) {
    const typename R::input_t* q = p + red.offset();
    for (int64_t j = 0; j < k; ++j) r.step(acc[j], q[j], pos);
  }
}

// Work units: single outputs (horizontal) or blocks of up to kVerticalBlock adjacent outputs
// (vertical). visit(o0, k, input offset) is called for units [ub, ue) in order.
struct Units {
  bool vertical = false;
  int64_t inner = 1;   // vertical: size of the contiguous kept dim
  int64_t blocks = 1;  // vertical: blocks per run of `inner` outputs
  int64_t count = 0;

  explicit Units(const ReducePlan& plan) {
    vertical = plan.out_strides.back() == 1 && plan.red_strides.back() != 1 && plan.out_sizes.back() >= 4;
    if (vertical) {
      inner = plan.out_sizes.back();
      blocks = (inner + kVerticalBlock - 1) / kVerticalBlock;
      count = plan.num_outputs / inner * blocks;
    } else {
      count = plan.num_outputs;
    }
  }

  template <typename Visit>
  void for_range(const ReducePlan& plan, int64_t ub, int64_t ue, const Visit& visit) const {
    const int64_t nd = static_cast<int64_t>(plan.out_sizes.size());
    if (!vertical) {
      Odometer out(plan.out_sizes.data(), plan.out_strides.data(), nd);
      out.seek(ub);
      for (int64_t u = ub; u < ue; ++u, out.next()) visit(u, int64_t{1}, out.offset());
      return;
    }
    Odometer outer(plan.out_sizes.data(), plan.out_strides.data(), nd - 1);
    outer.seek(ub / blocks);
    for (int64_t u = ub; u < ue; ++u) {
      const int64_t b = u % blocks;
      if (b == 0 && u != ub) outer.next();
      const int64_t j0 = b * kVerticalBlock;
      visit(u / blocks * inner + j0, std::min(kVerticalBlock, inner - j0), outer.offset() + j0);
    }
  }
};

}  // namespace detail

/// Runs reducer `r` over `base` (x's element 0) as planned. Outputs of an empty reduced range
/// get r.init(o) (callers reject that case first where it is an error).
template <typename R>
void reduce(const ReducePlan& plan, const typename R::input_t* base, const R& r) {
  using Acc = typename R::acc_t;
  const int64_t n_out = plan.num_outputs, n_red = plan.reduce_numel;
  if (n_out == 0) return;
  if (n_red == 0) {
    for (int64_t o = 0; o < n_out; ++o) r.write(o, r.init(o));
    return;
  }
  const detail::Units units(plan);
  if (n_out <= detail::kSplitMaxOutputs && n_red >= 2 * kParallelGrain) {
    // Input offsets of the outputs, so that each run of reduced positions is read for all
    // outputs in turn: memory order when kept dims sit between reduced ones (N, C, H, W → C).
    std::vector<int64_t> out_offset;
    units.for_range(plan, 0, units.count, [&](int64_t, int64_t, int64_t offset) { out_offset.push_back(offset); });
    const int64_t stride = plan.red_strides.back();
    // Reduces positions [rb, re) of every output into acc[0, n_out).
    auto run_all = [&](int64_t rb, int64_t re, Acc* acc) {
      if (units.vertical) {
        units.for_range(plan, 0, units.count, [&](int64_t o0, int64_t k, int64_t offset) {
          detail::accumulate_block(plan, base + offset, k, rb, re, acc + o0, r);
        });
        return;
      }
      detail::for_each_segment(plan, rb, re, [&](int64_t off, int64_t n, int64_t pos) {
        for (int64_t o = 0; o < n_out; ++o) r.row(acc[o], base + out_offset[o] + off, stride, n, pos);
      });
    };

    const int64_t len = std::max((n_red + detail::kSplitMaxChunks - 1) / detail::kSplitMaxChunks,
                                 (detail::kSplitChunkWork + n_out - 1) / n_out);
    const int64_t chunks = (n_red + len - 1) / len;
    // (Arrays, not std::vector: an accumulator may be bool.)
    std::unique_ptr<Acc[]> partial(new Acc[static_cast<size_t>(chunks * n_out)]);
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t o = 0; o < n_out; ++o) partial[c * n_out + o] = r.init(o);
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c)
        run_all(c * len, std::min(n_red, (c + 1) * len), partial.get() + c * n_out);
    });
    for (int64_t o = 0; o < n_out; ++o) {
      for (int64_t c = 1; c < chunks; ++c) r.combine(partial[o], partial[c * n_out + o]);
      r.write(o, partial[o]);
    }
    return;
  }

  const int64_t per_unit = n_red * (units.vertical ? std::min(units.inner, detail::kVerticalBlock) : 1);
  parallel_for(units.count, std::max<int64_t>(1, kParallelGrain / per_unit), [&](int64_t ub, int64_t ue) {
    std::unique_ptr<Acc[]> acc(new Acc[static_cast<size_t>(units.vertical ? detail::kVerticalBlock : 1)]);
    units.for_range(plan, ub, ue, [&](int64_t o0, int64_t k, int64_t offset) {
      for (int64_t j = 0; j < k; ++j) acc[j] = r.init(o0 + j);
      if (units.vertical) detail::accumulate_block(plan, base + offset, k, 0, n_red, acc.get(), r);
      else detail::accumulate_rows(plan, base + offset, 0, n_red, acc[0], r);
      for (int64_t j = 0; j < k; ++j) r.write(o0 + j, acc[j]);
    });
  });
}

}  // namespace qflow::kernels
