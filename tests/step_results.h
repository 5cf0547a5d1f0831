#pragma once
// One training step's observable results, shared by the tests that compare two ways of running
// a model (fused against unfused) bit for bit.
#include <vector>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// Runs forward, mean(y²) backward on `m` (gradients zeroed first) and returns the output, every
/// parameter's gradient and a copy of every buffer (running statistics, counters, observers).
inline std::vector<Tensor> step_results(nn::Module& m, const Tensor& x) {
  m.zero_grad();
  Tensor y = m(x);
  (y * y).mean().backward();
  std::vector<Tensor> r{y.detach()};
  for (const Tensor& p : m.parameters()) r.push_back(p.grad());
  for (const Tensor& b : m.buffers()) r.push_back(b.clone());
  return r;
}

}  // namespace qflow::testing_util
