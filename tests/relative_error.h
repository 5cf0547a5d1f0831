#pragma once
// The error of a tensor against a reference relative to the reference's scale, shared by the
// tests that compare kernels computing the same values in another order or precision.
#include <algorithm>
#include <cmath>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// max |got - want| / max |want| (the absolute error when `want` is all zeros); sizes must match.
inline double relative_error(const Tensor& got, const Tensor& want) {
  const auto g = to_vector<double>(got), w = to_vector<double>(want);
  double diff = g.size() == w.size() ? 0.0 : INFINITY, scale = 0;
  for (size_t i = 0; i < std::min(g.size(), w.size()); ++i) {
    diff = std::max(diff, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

}  // namespace qflow::testing_util
