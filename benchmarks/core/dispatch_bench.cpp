// Per-call overhead of the op road (typed wrapper → dispatcher → layers → kernel): add of
// two 1-element tensors, where the arithmetic itself is negligible. Time is ns per op.
// Run: build/bin/qflow-bench-core --benchmark_filter=Dispatch
#include <benchmark/benchmark.h>

#include "qflow/qflow.h"

namespace {

void BM_DispatchAdd(benchmark::State& state) {
  const qflow::Tensor a = qflow::from_vector<float>({1.0f}), b = qflow::from_vector<float>({2.0f});
  for (auto _ : state) benchmark::DoNotOptimize(qflow::add(a, b).raw_data());
}

// Inputs require grad: every call also records an AddBackward node.
void BM_DispatchAddAutograd(benchmark::State& state) {
  const qflow::Tensor a = qflow::from_vector<float>({1.0f}).requires_grad_();
  const qflow::Tensor b = qflow::from_vector<float>({2.0f}).requires_grad_();
  for (auto _ : state) benchmark::DoNotOptimize(qflow::add(a, b).raw_data());
}

// Inputs require grad but grad mode is off: the autograd layer is skipped by key exclusion.
void BM_DispatchAddNoGrad(benchmark::State& state) {
  const qflow::Tensor a = qflow::from_vector<float>({1.0f}).requires_grad_();
  const qflow::Tensor b = qflow::from_vector<float>({2.0f}).requires_grad_();
  qflow::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(qflow::add(a, b).raw_data());
}

}  // namespace

BENCHMARK(BM_DispatchAdd);
BENCHMARK(BM_DispatchAddAutograd);
BENCHMARK(BM_DispatchAddNoGrad);
