#pragma once
// Shared by the nn golden tests: the input/parameter formulas of tests/golden/nn_layers.py
// reproduced bit for bit, and comparison against the generated nn_golden.inc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "qflow/nn/nn.h"
#include "qflow/qflow.h"
#include "compare.h"
#include "test_helpers.h"

namespace nn_golden {

/// One PyTorch tensor: shape and row-major float32 values.
struct Golden {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// seq(shape, seed, scale)[i] = float32(scale · sin(0.37 · (i + 1) + seed)), computed in
/// float64 exactly as the Python script does, then cast to `dtype` (test_helpers.h).
inline qflow::Tensor seq(const qflow::IntList& shape, double seed, double scale = 1.0,
                         qflow::DType dtype = qflow::DType::Float32) {
  return qflow::testing_util::sin_seq_from1_f32(shape, seed, scale, dtype);
}

/// The k-th parameter (named_parameters order) becomes seq(shape, 1 + k, 0.3), like the
/// script's fill_params. Buffers are left alone.
inline void fill_params(qflow::nn::Module& m) {
  qflow::NoGradGuard no_grad;
  int k = 0;
  for (auto& [name, p] : m.named_parameters()) {
    qflow::Tensor dst = p;
    dst.copy_(seq(p.sizes(), 1.0 + k++, 0.3, p.dtype()));
  }
}

inline qflow::Tensor to_tensor(const Golden& g) { return qflow::from_vector<float>(g.values, g.shape); }

/// |got − want| <= rtol·|want| + atol for every element, after checking the shape; NaN or Inf
/// fails where PyTorch's value is finite (compare.h: a recorded NaN/Inf must be reproduced).
inline void expect_close(const qflow::Tensor& got, const Golden& want, double rtol = 1e-5, double atol = 1e-6,
                         const std::string& what = "") {
  ASSERT_EQ(got.sizes(), qflow::IntList(want.shape)) << what;
  const std::vector<double> g = qflow::to_vector<double>(got);
  qflow::testing_util::expect_all_close(g, std::vector<double>(want.values.begin(), want.values.end()), rtol, atol,
                                        qflow::testing_util::NonFinite::kMustMatch, what);
}

/// The script's small_net(): Conv2d(3, 4, 3, padding 1, no bias) → BatchNorm2d(4) → ReLU →
/// MaxPool2d(2) → Flatten → Linear(64, 3), for (N, 3, 8, 8) inputs.
inline std::shared_ptr<qflow::nn::Sequential> small_net() {
  namespace nn = qflow::nn;
  return std::make_shared<nn::Sequential>(nn::Conv2d({.in = 3, .out = 4, .kernel = 3, .padding = 1, .bias = false}),
                                          nn::BatchNorm2d({.features = 4}), nn::ReLU(), nn::MaxPool2d({.kernel = 2}),
                                          nn::Flatten(), nn::Linear({.in = 64, .out = 3}));
}

}  // namespace nn_golden
