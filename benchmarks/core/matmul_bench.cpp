// GEMM throughput: qflow::matmul (dispatcher + allocation + OpenBLAS) against a bare
// cblas_sgemm into a preallocated output, on the same square float32 sizes.
// Run: build/bin/qflow-bench-core --benchmark_filter=Matmul (prints qflow/cblas ratios at the end).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include "qflow/qflow.h"

namespace {

// Value in GFLOP per iteration, reported as a rate: prints GFLOP/s.
void report_gflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_QflowMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const qflow::Tensor a = qflow::randn({n, n}), b = qflow::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(qflow::matmul(a, b).raw_data());
  report_gflops(state, n);
}

// The same product with the left operand a transposed view (read in place as CblasTrans).
void BM_QflowMatmulTransposed(benchmark::State& state) {
  const int64_t n = state.range(0);
  const qflow::Tensor a = qflow::randn({n, n}).t(), b = qflow::randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(qflow::matmul(a, b).raw_data());
  report_gflops(state, n);
}

void BM_CblasSgemm(benchmark::State& state) {
  qflow::use_best_openblas_kernels();  // the kernels qflow's GEMMs use (Note [OpenBLAS kernel selection])
  const int64_t n = state.range(0);
  const qflow::Tensor a = qflow::randn({n, n}), b = qflow::randn({n, n});
  qflow::Tensor c = qflow::empty({n, n});
  const auto bn = static_cast<blasint>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0f, a.data_ptr<float>(), bn, b.data_ptr<float>(),
                bn, 0.0f, c.data_ptr<float>(), bn);
    benchmark::ClobberMemory();
  }
  report_gflops(state, n);
}

}  // namespace

BENCHMARK(BM_QflowMatmul)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CblasSgemm)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_QflowMatmulTransposed)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
