// Memory bandwidth of large element-wise ops and reductions (16M float32 = 64 MiB per
// tensor). Bytes processed count every input read and output written once, so GB/s is
// directly comparable to the machine's memory bandwidth. Each op allocates its output, as
// a user's call does.
// Run: build/bin/qflow-bench-core --benchmark_filter="BM_(Add|Mul|Relu|Sum)"
#include <benchmark/benchmark.h>

#include "qflow/qflow.h"

namespace {

constexpr int64_t kN = int64_t{16} << 20;

// Runs `op` (returning a Tensor) and reports `tensors_touched` * 4 bytes * kN per call. An op
// that throws (e.g. not built yet) marks the benchmark as skipped instead of aborting.
template <typename Op>
void run_op(benchmark::State& state, int tensors_touched, const Op& op) {
  try {
    benchmark::DoNotOptimize(op().raw_data());
  } catch (const qflow::Error& e) {
    state.SkipWithError(e.message().c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(op().raw_data());
  state.SetBytesProcessed(state.iterations() * tensors_touched * kN * int64_t(sizeof(float)));
}

void BM_Add(benchmark::State& state) {
  const qflow::Tensor a = qflow::randn({kN}), b = qflow::randn({kN});
  run_op(state, 3, [&] { return qflow::add(a, b); });
}
void BM_Mul(benchmark::State& state) {
  const qflow::Tensor a = qflow::randn({kN}), b = qflow::randn({kN});
  run_op(state, 3, [&] { return qflow::mul(a, b); });
}
void BM_Relu(benchmark::State& state) {
  const qflow::Tensor a = qflow::randn({kN});
  run_op(state, 2, [&] { return qflow::relu(a); });
}
void BM_Sum(benchmark::State& state) {
  const qflow::Tensor a = qflow::randn({kN});
  run_op(state, 1, [&] { return qflow::sum(a); });
}

}  // namespace

BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Mul)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Relu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum)->Unit(benchmark::kMillisecond)->UseRealTime();
