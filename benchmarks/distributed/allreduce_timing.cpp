#include "allreduce_timing.h"

#include <chrono>

#include "qflow/core/factory.h"

namespace qflow::bench {
namespace {

double seconds_of(auto&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<double> time_all_reduce(distributed::ProcessGroup& world, double bytes, int repetitions) {
  Tensor t = zeros({static_cast<int64_t>(bytes / 4)});
  world.all_reduce(t);  // untimed: first-touch of the buffers, MPI's connections for this size
  std::vector<double> out;
  for (int i = 0; i < repetitions; ++i) {
    world.barrier("qflow-bench-ddp: before the standalone allreduce");
    out.push_back(seconds_of([&] { world.all_reduce(t, distributed::ReduceOp::Sum, "qflow-bench-ddp: standalone allreduce"); }));
  }
  return out;
}

std::vector<double> time_small_all_reduce(distributed::ProcessGroup& world, int batches, int per_batch) {
  Tensor t = zeros({1});
  world.all_reduce(t);
  std::vector<double> out;
  for (int i = 0; i < batches; ++i) {
    world.barrier("qflow-bench-ddp: before the small allreduces");
    out.push_back(seconds_of([&] {
                    for (int k = 0; k < per_batch; ++k) world.all_reduce(t, distributed::ReduceOp::Sum, "qflow-bench-ddp: 4-byte allreduce");
                  }) / per_batch);
  }
  return out;
}

}  // namespace qflow::bench
