#pragma once
// Element-wise loops over strided, broadcast operands. See Note [Element-wise loops].
//
// Note [Element-wise loops]
// Operand 0 is the (contiguous) output; the others are read through broadcast strides.
// Dims are collapsed where the memory layout allows, so the common cases (all contiguous,
// or one operand broadcast along the innermost dim) become one flat loop that the compiler
// vectorises; the outer rows (or the one flat range) are split across threads with
// parallel_for above kParallelGrain elements.
#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <cstdint>
#include <vector>

#include "qflow/core/parallel.h"
#include "qflow/core/tensor.h"

namespace qflow::kernels {

template <size_t N>
struct LoopPlan {
  std::vector<int64_t> sizes;                   // collapsed shape, innermost last
  std::array<std::vector<int64_t>, N> strides;  // per operand, in elements
};

template <size_t N>
LoopPlan<N> make_loop_plan(const std::vector<int64_t>& sizes, const std::array<std::vector<int64_t>, N>& strides) {
  LoopPlan<N> plan;
  // Drop size-1 dims, then merge dim i into i+1 when every operand is contiguous across them.
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!plan.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        if (plan.strides[k].back() != strides[k][d] * sizes[d]) mergeable = false;
      if (mergeable) {
        plan.sizes.back() *= sizes[d];
        for (size_t k = 0; k < N; ++k) plan.strides[k].back() = strides[k][d];
        continue;
      }
    }
    plan.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(strides[k][d]);
  }
  if (plan.sizes.empty()) {  // a single element
    plan.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

/// Calls inner(ptrs, inner_strides, n) for every innermost row of the plan, where ptrs are
/// the operands' typed pointers to the row's first element.
template <typename... Ts, typename Inner>
void for_each_row(const LoopPlan<sizeof...(Ts)>& plan, std::tuple<Ts*...> base, const Inner& inner) {
  constexpr size_t N = sizeof...(Ts);
  const int64_t ndim = static_cast<int64_t>(plan.sizes.size());
  const int64_t inner_n = plan.sizes.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) rows *= plan.sizes[d];

  auto offset_ptrs = [&](int64_t row, int64_t start) {
    std::array<int64_t, N> off{};
    int64_t r = row;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      const int64_t idx = r % plan.sizes[d];
      r /= plan.sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx * plan.strides[k][d];
    }
    for (size_t k = 0; k < N; ++k) off[k] += start * inner_strides[k];
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<Ts*...>{(std::get<I>(base) + off[I])...};
    }(std::index_sequence_for<Ts...>{});
  };

  if (rows == 1) {
    parallel_for(inner_n, kParallelGrain, [&](int64_t b, int64_t e) { inner(offset_ptrs(0, b), inner_strides, e - b); });
  } else {
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner_n, 1));
    parallel_for(rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) inner(offset_ptrs(row, 0), inner_strides, inner_n);
    });
  }
}

/// out[i] = f(a[i]) with `out` contiguous of a's shape; a any layout.
template <typename TOut, typename TIn, typename F>
void unary_loop(const Tensor& out, const Tensor& a, const F& f) {
  LoopPlan<2> plan = make_loop_plan<2>(out.sizes(), {out.strides(), a.strides()});
  for_each_row<TOut, const TIn>(plan, {out.data_ptr<TOut>(), a.data_ptr<TIn>()},
                                [&](std::tuple<TOut*, const TIn*> p, const std::array<int64_t, 2>& s, int64_t n) {
                                  auto [o, x] = p;
                                  if (s[0] == 1 && s[1] == 1) {
                                    for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
                                  } else {
                                    for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]]);
                                  }
                                });
}

/// out = f(a, b) with NumPy broadcasting; `a_strides`/`b_strides` are broadcast to out's shape.
template <typename TOut, typename TA, typename TB, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const std::vector<int64_t>& a_strides, const Tensor& b,
                 const std::vector<int64_t>& b_strides, const F& f) {
  LoopPlan<3> plan = make_loop_plan<3>(out.sizes(), {out.strides(), a_strides, b_strides});
  for_each_row<TOut, const TA, const TB>(
      plan, {out.data_ptr<TOut>(), a.data_ptr<TA>(), b.data_ptr<TB>()},
      [&](std::tuple<TOut*, const TA*, const TB*> p, const std::array<int64_t, 3>& s, int64_t n) {
        auto [o, x, y] = p;
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
          const TB yv = *y;
          for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
          const TA xv = *x;
          for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]], y[i * s[2]]);
        }
      });
}

}  // namespace qflow::kernels
