#include "qflow/core/parallel.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <thread>

#include "qflow/core/error.h"

namespace qflow {

namespace {
int initial_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
std::atomic<int>& thread_setting() {
  static std::atomic<int> n{initial_threads()};
  return n;
}
}  // namespace

int num_threads() { return thread_setting().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  QFLOW_CHECK(n >= 1, "set_num_threads: expected a positive thread count, got {}", n);
  thread_setting().store(n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

}  // namespace qflow
