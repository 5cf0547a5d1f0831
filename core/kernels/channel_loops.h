#pragma once
// Per-channel loops over a contiguous (N, C, S) tensor (batch norm and its backward).
//
// Channels are independent, so both loops split channels (or rows) across threads and keep
// the innermost loop on contiguous memory: over s when S > 1, over channels when S == 1
// (an (N, C) input, where one channel is a strided column). Sums accumulate one channel at a
// time in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <array>
#include <type_traits>
#include <cstdint>

#include "qflow/core/parallel.h"

namespace qflow::kernels {

/// Elements per partial sum kept in the terms' own type (float for float tensors) before it
/// is added to the channel's double total: short enough that float rounding stays near one
/// ulp of the partial, long enough that the vector loop, not the double adds, sets the speed.
inline constexpr int64_t kPartialSumLength = 256;

/// acc[k][c] = sum over elements i of channel c of terms(i, c)[k], for K sums in one pass.
/// `terms` returns a std::array<A, K>; sums run in A over runs of kPartialSumLength elements
/// and in double across runs. i is the flat index n * C * S + c * S + s.
template <size_t K, typename Terms>
void channel_sums(int64_t N, int64_t C, int64_t S, const std::array<double*, K>& acc, const Terms& terms) {
  using A = typename std::invoke_result_t<Terms, int64_t, int64_t>::value_type;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N * S, 1));
  parallel_for(C, grain, [&](int64_t cb, int64_t ce) {
    if (S == 1) {  // (N, C): the inner loop runs over channels
      for (size_t k = 0; k < K; ++k) std::fill(acc[k] + cb, acc[k] + ce, 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = n * C;
        for (int64_t c = cb; c < ce; ++c) {
          const auto t = terms(base + c, c);
          for (size_t k = 0; k < K; ++k) acc[k][c] += static_cast<double>(t[k]);
        }
      }
      return;
    }
    for (int64_t c = cb; c < ce; ++c) {
      std::array<double, K> total{};
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = (n * C + c) * S;
        for (int64_t s0 = 0; s0 < S; s0 += kPartialSumLength) {
          const int64_t s1 = std::min(S, s0 + kPartialSumLength);
          // kLanes independent partial sums per term: the compiler keeps them in vector
          // registers (one running sum would stay scalar, float addition not being associative).
          constexpr int64_t kLanes = 16;
          A part[K][kLanes] = {};
          int64_t s = s0;
          for (; s + kLanes <= s1; s += kLanes) {
            for (int64_t l = 0; l < kLanes; ++l) {
              const auto t = terms(base + s + l, c);
              for (size_t k = 0; k < K; ++k) part[k][l] += t[k];
            }
          }
          for (; s < s1; ++s) {
            const auto t = terms(base + s, c);
            for (size_t k = 0; k < K; ++k) part[k][0] += t[k];
          }
          for (size_t k = 0; k < K; ++k) {
            A run = 0;
            for (int64_t l = 0; l < kLanes; ++l) run += part[k][l];
            total[k] += static_cast<double>(run);
          }
        }
      }
      for (size_t k = 0; k < K; ++k) acc[k][c] = total[k];
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
