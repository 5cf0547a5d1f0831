#pragma once
// Comparing computed values with a reference under a tolerance: the one rule every comparison
// helper of the tests uses (relative_error.h, nn/golden_util.h, onnx/onnx_test_util.h,
// quant/quant_test_util.h, test_helpers.h; negative controls in */comparison_helpers_test.cpp).
//
// Every comparison with NaN is false, so a test written `|g − w| > tol → fail`, or a maximum
// of errors folded with std::max (std::max(0, NaN) is 0), passes a NaN: an all-NaN result
// would score an error of 0. Here the test is written the other way round — an element
// passes only when it is shown to be close — and non-finite values are ruled explicitly:
//
// - A finite reference is met only by a finite value within the tolerance: NaN and ±Inf fail.
// - A non-finite reference is met by the same non-finite value (NaN by NaN, +Inf by +Inf)
//   only where the caller says non-finite references are intended (NonFinite::kMustMatch):
//   values written down by hand or recorded from PyTorch (a golden -inf of logsumexp over an
//   empty dimension). Where the reference is itself computed by qflow (one process against
//   two, a fused kernel against its parts, the integer model against its simulation), one
//   broken kernel would put the same NaN on both sides, so there (NonFinite::kFail, the
//   default) any NaN or Inf on either side fails, matched or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// What a non-finite reference element means (see the top of this file).
enum class NonFinite {
  kFail,       // the reference is computed: NaN or ±Inf on either side fails
  kMustMatch,  // the reference is written down: its NaN/±Inf must be reproduced exactly
};

/// Whether `got` meets `want` within atol + rtol·|want| under the rules above.
inline bool close_enough(double got, double want, double rtol, double atol, NonFinite non_finite = NonFinite::kFail) {
  if (!std::isfinite(want)) {
    if (non_finite == NonFinite::kFail) return false;
    return std::isnan(want) ? std::isnan(got) : got == want;
  }
  return std::isfinite(got) && std::abs(got - want) <= atol + rtol * std::abs(want);
}

/// max |got − want| / max |want| (the absolute error when `want` is all zeros): for two
/// computations of the same values in another order or precision. +Inf when either is
/// undefined, the sizes differ or any element of either side is NaN or ±Inf (NonFinite::kFail: both are computed),
/// so `EXPECT_LE(relative_error(g, w), tol)` fails on them.
inline double relative_error(const Tensor& got, const Tensor& want) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!got.defined() || !want.defined()) return kInf;  // e.g. ONNX Runtime failed (reported there)
  const auto g = to_vector<double>(got), w = to_vector<double>(want);
  if (g.size() != w.size()) return kInf;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(w[i])) return kInf;
    diff = std::max(diff, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

/// 1 − cos(got, want), the two flattened into vectors: 0 for the same direction. For gradients
/// behind a ReLU computed on two devices, where an element whose input is within rounding of 0
/// takes the other branch (a large local difference that relative_error reports in full) while
/// a wrong kernel turns the whole vector. +Inf as relative_error on bad input, and when either
/// is all zeros.
inline double cosine_distance(const Tensor& got, const Tensor& want) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!got.defined() || !want.defined()) return kInf;
  const auto g = to_vector<double>(got), w = to_vector<double>(want);
  if (g.size() != w.size()) return kInf;
  double gw = 0, gg = 0, ww = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(w[i])) return kInf;
    gw += g[i] * w[i];
    gg += g[i] * g[i];
    ww += w[i] * w[i];
  }
  if (gg == 0 || ww == 0) return gg == ww ? 0 : kInf;
  return 1 - gw / std::sqrt(gg * ww);
}

/// Every element of `got` meets `want` (close_enough), after a size check; one failure per
/// miss, the first `max_reported` of them with their values, then a count.
inline void expect_all_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                             NonFinite non_finite = NonFinite::kFail, const std::string& what = "",
                             int max_reported = 5) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << what << (what.empty() ? "" : ": ") << got.size() << " values, want " << want.size();
    return;
  }
  int64_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (close_enough(got[i], want[i], rtol, atol, non_finite)) continue;
    if (misses++ < max_reported)
      ADD_FAILURE() << what << (what.empty() ? "" : " ") << "element " << i << ": got " << got[i] << ", want " << want[i]
                    << " (tolerance " << atol << " + " << rtol << "·|want|)";
  }
  if (misses > max_reported)
    ADD_FAILURE() << what << (what.empty() ? "" : ": ") << misses << " of " << got.size() << " elements missed";
}

/// The tensor form: the same sizes, then expect_all_close on the values (read as float64).
inline void expect_all_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                             NonFinite non_finite = NonFinite::kFail, const std::string& what = "") {
  if (got.sizes() != want.sizes()) {
    ADD_FAILURE() << what << (what.empty() ? "" : ": ") << "sizes " << fmt::format("{}", fmt::join(got.sizes(), ", "))
                  << ", want " << fmt::format("{}", fmt::join(want.sizes(), ", "));
    return;
  }
  expect_all_close(to_vector<double>(got), to_vector<double>(want), rtol, atol, non_finite, what);
}

}  // namespace qflow::testing_util
