#pragma once
// The machine's float32 FMA peak, measured: every thread runs independent vector FMAs
// (AVX-512 when the CPU has it, else AVX2) long enough to time, and the GFLOP/s of all
// threads together come back (2 FLOPs per lane per FMA). The reference line for kernels
// that claim to run "near the peak".
#include <immintrin.h>
#include <omp.h>

#include <chrono>

namespace qflow::bench {

namespace detail {

// 12 independent accumulators hide the FMA latency (4 cycles, 2 ports) on current cores.
template <typename V, V (*Fma)(V, V, V), V (*Set)(float)>
double fma_loop_flops(long iterations) {
  V acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = Set(0.001f * static_cast<float>(i));
  const V a = Set(0.999999f), b = Set(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (auto& v : acc) v = Fma(v, a, b);
  volatile float sink = 0;
  for (auto& v : acc) sink = sink + reinterpret_cast<float*>(&v)[0];
  return 2.0 * 12 * static_cast<double>(sizeof(V) / sizeof(float)) * static_cast<double>(iterations);
}

__attribute__((target("avx512f"))) inline __m512 fma512(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
__attribute__((target("avx512f"))) inline __m512 set512(float v) { return _mm512_set1_ps(v); }
__attribute__((target("avx2,fma"))) inline __m256 fma256(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
__attribute__((target("avx2,fma"))) inline __m256 set256(float v) { return _mm256_set1_ps(v); }

__attribute__((target("avx512f"))) inline double flops512(long n) { return fma_loop_flops<__m512, fma512, set512>(n); }
__attribute__((target("avx2,fma"))) inline double flops256(long n) { return fma_loop_flops<__m256, fma256, set256>(n); }

}  // namespace detail

/// Peak float32 GFLOP/s of `threads` threads (0 when the CPU has neither AVX-512 nor AVX2+FMA).
inline double fma_peak_gflops(int threads) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0.0;
  constexpr long kIterations = 20'000'000;
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {  // the best of three: a noisy neighbour only slows a run
    double flops = 0.0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    flops += avx512 ? detail::flops512(kIterations) : detail::flops256(kIterations);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s * 1e-9);
  }
  return best;
}

}  // namespace qflow::bench
