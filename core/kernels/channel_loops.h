#pragma once
// Per-channel loops over a contiguous (N, C, S) tensor (batch norm and its backward).
//
// Channels are independent, so both loops split channels (or rows) across threads and keep
// the innermost loop on contiguous memory: over s when S > 1, over channels when S == 1
// (an (N, C) input, where one channel is a strided column). Sums accumulate in double, one
// channel at a time in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstdint>

#include "qflow/core/parallel.h"

namespace qflow::kernels {

/// acc0[c] = sum over elements i of channel c of t0(i, c), acc1[c] likewise with t1
/// (two sums in one pass). i is the flat index n * C * S + c * S + s.
template <typename T0, typename T1>
void channel_sums(int64_t N, int64_t C, int64_t S, double* acc0, double* acc1, const T0& t0, const T1& t1) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N * S, 1));
  parallel_for(C, grain, [&](int64_t cb, int64_t ce) {
    if (S == 1) {
      std::fill(acc0 + cb, acc0 + ce, 0.0);
      std::fill(acc1 + cb, acc1 + ce, 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = n * C;
#pragma omp simd
        for (int64_t c = cb; c < ce; ++c) {
          acc0[c] += t0(base + c, c);
          acc1[c] += t1(base + c, c);
        }
      }
      return;
    }
    for (int64_t c = cb; c < ce; ++c) {
      double a0 = 0.0, a1 = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = (n * C + c) * S;
#pragma omp simd reduction(+ : a0, a1)
        for (int64_t s = 0; s < S; ++s) {
          a0 += t0(base + s, c);
          a1 += t1(base + s, c);
        }
      }
      acc0[c] = a0;
      acc1[c] = a1;
    }
  });
}

/// Calls f(i, c) for every element i of channel c (f writes its own output).
template <typename F>
void channel_map(int64_t N, int64_t C, int64_t S, const F& f) {
  if (S == 1) {
    parallel_for(N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t nb, int64_t ne) {
      for (int64_t n = nb; n < ne; ++n) {
        const int64_t base = n * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) f(base + c, c);
      }
    });
    return;
  }
  parallel_for(N * C, std::max<int64_t>(1, kParallelGrain / S), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t c = p % C, base = p * S;
#pragma omp simd
      for (int64_t s = 0; s < S; ++s) f(base + s, c);
    }
  });
}

}  // namespace qflow::kernels
