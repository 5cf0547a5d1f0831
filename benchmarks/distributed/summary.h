// Median and spread of a run's samples, for qflow-bench-ddp's report.
#pragma once
#include <algorithm>
#include <vector>

namespace qflow::bench {

struct Spread {
  double median = 0, min = 0, max = 0;
};

inline Spread spread_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

}  // namespace qflow::bench
