// ProcessGroup: a world of one without mpirun, collectives under mpirun -np 2.
#include <gtest/gtest.h>

#include <cstdlib>

#include "rank_util.h"

namespace qflow::distributed {
namespace {

using testing::world;

TEST(ProcessGroup, WorldOfOneWithoutMpirun) {
  if (launched_by_mpi()) GTEST_SKIP() << "launched by mpirun";
  EXPECT_EQ(world().rank(), 0);
  EXPECT_EQ(world().size(), 1);
  EXPECT_EQ(world().describe(), "single process");
  Tensor t = from_vector<float>({1, 2, 3});
  world().all_reduce(t);  // the sum over one rank is the tensor
  EXPECT_EQ(to_vector<float>(t), (std::vector<float>{1, 2, 3}));
  world().broadcast(t);
  EXPECT_EQ(world().sum(int64_t{5}), 5);
  world().barrier();
}

// The ctest run under `mpirun -np 2` (tests/CMakeLists.txt) sets QFLOW_EXPECT_WORLD_SIZE=2:
// without this check, an MPI that handed each process a world of one would skip every
// multi-rank test (QFLOW_NEEDS_RANKS) and the run would pass having tested nothing.
TEST(ProcessGroup, WorldHasTheSizeTheRunExpects) {
  const char* expected = std::getenv("QFLOW_EXPECT_WORLD_SIZE");
  if (expected == nullptr) GTEST_SKIP() << "QFLOW_EXPECT_WORLD_SIZE is not set (only the mpirun ctest run sets it)";
  EXPECT_EQ(world().size(), std::atoi(expected))
      << "this run expects a world of " << expected << " ranks (QFLOW_EXPECT_WORLD_SIZE) but MPI gave "
      << world().size() << " (" << world().describe() << "): the multi-rank tests would all have skipped";
}

TEST(ProcessGroup, AllReduceSumMinMax) {
  QFLOW_NEEDS_RANKS(2);
  const auto r = static_cast<float>(world().rank());
  const auto n = static_cast<float>(world().size());
  Tensor s = from_vector<float>({r, 10 * r + 1});
  world().all_reduce(s, ReduceOp::Sum);
  EXPECT_EQ(to_vector<float>(s), (std::vector<float>{n * (n - 1) / 2, 10 * n * (n - 1) / 2 + n}));
  Tensor lo = from_vector<double>({r + 3}), hi = from_vector<int64_t>({static_cast<int64_t>(r) - 7});
  world().all_reduce(lo, ReduceOp::Min);
  world().all_reduce(hi, ReduceOp::Max);
  EXPECT_EQ(lo.item<double>(), 3.0);
  EXPECT_EQ(hi.item<int64_t>(), static_cast<int64_t>(n) - 8);
  Tensor any = from_vector<bool>({world().rank() == 1});
  world().all_reduce(any, ReduceOp::Max);
  EXPECT_TRUE(any.item<bool>());
}

TEST(ProcessGroup, BroadcastFromAnyRoot) {
  QFLOW_NEEDS_RANKS(2);
  for (int root = 0; root < world().size(); ++root) {
    Tensor t = full({2, 3}, world().rank() * 100 + 7);
    world().broadcast(t, root);
    EXPECT_EQ(to_vector<float>(t), std::vector<float>(6, static_cast<float>(root * 100 + 7)));
  }
}

TEST(ProcessGroup, AsyncCollectivesAndDuplicates) {
  QFLOW_NEEDS_RANKS(2);
  ProcessGroup other = world().duplicate();
  EXPECT_EQ(other.rank(), world().rank());
  Tensor a = full({1000}, 1.0), b = full({10}, 2.0);
  Work wa = world().all_reduce_async(a, ReduceOp::Sum, "a");
  Work wb = other.all_reduce_async(b, ReduceOp::Sum, "b");  // another communicator: any order
  wb.wait();
  wa.wait();
  EXPECT_FALSE(wa.pending());
  EXPECT_EQ(to_vector<float>(a)[999], static_cast<float>(world().size()));
  EXPECT_EQ(to_vector<float>(b)[0], 2.0f * static_cast<float>(world().size()));
}

TEST(ProcessGroup, RefusesWhatMpiCannotSend) {
  Tensor t = zeros({4, 4}).transpose(0, 1);
  try {
    world().all_reduce(t);
    FAIL() << "a non-contiguous tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("expected a contiguous tensor"), std::string::npos) << e.message();
  }
  Tensor flags = zeros({2}, DType::Bool);
  try {
    world().all_reduce(flags, ReduceOp::Sum, "flags");
    // A world of one never looks at the op.
    EXPECT_EQ(world().size(), 1);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot sum bool tensors"), std::string::npos) << e.message();
  }
  EXPECT_THROW(world().broadcast(t, 0), Error);
  Tensor ok = zeros({2});
  EXPECT_THROW(world().broadcast(ok, world().size()), Error);
}

}  // namespace
}  // namespace qflow::distributed
