#pragma once
// One thread setting for the whole process: OpenMP loops and OpenBLAS share it, so the two
// never oversubscribe the cores.
#include <omp.h>

#include <cstdint>
#include <string>

namespace qflow {

/// Makes OpenBLAS use the fastest GEMM kernels for this CPU unless OPENBLAS_CORETYPE is set
/// (see Note [OpenBLAS kernel selection]); returns the kernel set in use. qflow's own BLAS
/// calls make the choice on first use (use_best_openblas_kernels); call this first only when
/// the program calls OpenBLAS itself, before any BLAS call.
std::string select_openblas_kernels();
/// select_openblas_kernels() once per process; every qflow BLAS wrapper calls it first.
void use_best_openblas_kernels();

/// Threads used by kernels and BLAS (default: the number of cores).
int num_threads();
void set_num_threads(int n);

/// Below this many elements a loop runs on one thread (fork/join costs more than it saves).
inline constexpr int64_t kParallelGrain = 32768;

/// Runs fn(begin, end) over [0, n) split into contiguous chunks across threads when
/// n >= grain; inline otherwise. fn must be safe to run concurrently on disjoint ranges.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  if (n < grain || num_threads() == 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(num_threads())
  {
    const int64_t tid = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = tid * chunk;
    const int64_t e = b + chunk < n ? b + chunk : n;
    if (b < e) fn(b, e);
  }
}

}  // namespace qflow
