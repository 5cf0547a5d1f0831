// ErrorSums: see compare_stats.h.
#include "compare_stats.h"

#include <cmath>
#include <limits>
#include <vector>

#include "qflow/core/factory.h"

namespace qflow::quant::detail {

void ErrorSums::add(const Tensor& ref, const Tensor& q) {
  QFLOW_CHECK(ref.sizes() == q.sizes(), "ErrorSums::add: reference [{}] and quantized [{}] differ in size",
              fmt::join(ref.sizes(), ", "), fmt::join(q.sizes(), ", "));
  const std::vector<double> r = to_vector<double>(ref.contiguous().to(DType::Float64));
  const std::vector<double> v = to_vector<double>(q.contiguous().to(DType::Float64));
  for (size_t i = 0; i < r.size(); ++i) {
    const double e = r[i] - v[i];
    ref_squared += r[i] * r[i];
    error_squared += e * e;
    dot += r[i] * v[i];
    q_squared += v[i] * v[i];
    max_abs_error = std::max(max_abs_error, std::abs(e));
  }
  elements += static_cast<int64_t>(r.size());
}

double ErrorSums::sqnr_db() const {
  if (error_squared == 0) return std::numeric_limits<double>::infinity();
  if (ref_squared == 0) return -std::numeric_limits<double>::infinity();
  return 10 * std::log10(ref_squared / error_squared);
}

double ErrorSums::cosine() const {
  if (error_squared == 0) return 1;
  if (ref_squared == 0 || q_squared == 0) return 0;
  return dot / std::sqrt(ref_squared * q_squared);
}

}  // namespace qflow::quant::detail
