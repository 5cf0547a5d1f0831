#pragma once
// The sums behind the numeric debugger's SQNR, cosine and max abs error (Note [Numeric
// debugger] in compare.h), accumulated in float64 over every value of every batch.
#include <cstdint>

#include "qflow/core/tensor.h"

namespace qflow::quant::detail {

struct ErrorSums {
  double ref_squared = 0;    // Σ ref²
  double error_squared = 0;  // Σ (ref − q)²
  double dot = 0;            // Σ ref·q
  double q_squared = 0;      // Σ q²
  double max_abs_error = 0;  // max |ref − q|
  int64_t elements = 0;

  /// Adds one tensor pair (same sizes; any floating dtype).
  void add(const Tensor& ref, const Tensor& q);
  /// 10·log10(Σ ref² / Σ (ref − q)²): +inf when equal, −inf when ref is all zeros and q not.
  double sqnr_db() const;
  /// Σ ref·q / √(Σ ref² · Σ q²): 1 when equal, 0 when one side is all zeros and the other not.
  double cosine() const;
};

}  // namespace qflow::quant::detail
