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

// ---- channel-blocked layouts -------------------------------------------------------------------

/// Where a per-channel kernel's elements live: plain (N, C, S), or channel-blocked
/// (N, ceil(C / block), S, block) with block 8 or 16 (oneDNN's nChw8c / nChw16c, see
/// Note [Opaque layouts]). Blocked loops also visit the padding lanes, channels
/// [C, padded_channels()): per-channel arrays a caller's lambdas read must be that long, and
/// zero there, so that padding maps to zero.
struct ChannelLayout {
  int64_t N = 0, C = 0, S = 1, block = 0;
  int64_t blocks() const { return block ? (C + block - 1) / block : C; }
  int64_t padded_channels() const { return block ? blocks() * block : C; }
};

namespace detail {

template <int64_t B, size_t K, typename Terms>
void blocked_channel_sums(const ChannelLayout& l, const std::array<double*, K>& acc, const Terms& terms) {
  using A = typename std::invoke_result_t<Terms, int64_t, int64_t>::value_type;
  const int64_t blocks = l.blocks();
  parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t cb = bb; cb < be; ++cb) {
      double total[K][B] = {};
      for (int64_t n = 0; n < l.N; ++n) {
        const int64_t base = (n * blocks + cb) * l.S * B;
        for (int64_t s0 = 0; s0 < l.S; s0 += kPartialSumLength) {
          const int64_t s1 = std::min(l.S, s0 + kPartialSumLength);
          A part[K][B] = {};  // one partial sum per channel lane: B lanes form one vector
          for (int64_t s = s0; s < s1; ++s)
            for (int64_t j = 0; j < B; ++j) {
              const auto t = terms(base + s * B + j, cb * B + j);
              for (size_t k = 0; k < K; ++k) part[k][j] += t[k];
            }
          for (size_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < B; ++j) total[k][j] += static_cast<double>(part[k][j]);
        }
      }
      for (int64_t j = 0; j < B && cb * B + j < l.C; ++j)
        for (size_t k = 0; k < K; ++k) acc[k][cb * B + j] = total[k][j];
    }
  });
}

template <int64_t B, typename F>
void blocked_channel_map(const ChannelLayout& l, const F& f) {
  const int64_t blocks = l.blocks();
  parallel_for(l.N * blocks, std::max<int64_t>(1, kParallelGrain / (l.S * B)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c0 = (r % blocks) * B, base = r * l.S * B;
      for (int64_t s = 0; s < l.S; ++s)
#pragma omp simd
        for (int64_t j = 0; j < B; ++j) f(base + s * B + j, c0 + j);
    }
  });
}

}  // namespace detail

/// channel_sums over either layout (element index i is the storage index).
template <size_t K, typename Terms>
void channel_sums(const ChannelLayout& l, const std::array<double*, K>& acc, const Terms& terms) {
  if (l.block == 16) return detail::blocked_channel_sums<16>(l, acc, terms);
  if (l.block == 8) return detail::blocked_channel_sums<8>(l, acc, terms);
  channel_sums<K>(l.N, l.C, l.S, acc, terms);
}

/// channel_map over either layout (padding lanes included, see ChannelLayout).
template <typename F>
void channel_map(const ChannelLayout& l, const F& f) {
  if (l.block == 16) return detail::blocked_channel_map<16>(l, f);
  if (l.block == 8) return detail::blocked_channel_map<8>(l, f);
  channel_map(l.N, l.C, l.S, f);
}

}  // namespace qflow::kernels
