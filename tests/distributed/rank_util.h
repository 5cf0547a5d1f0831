#pragma once
// Shared by the distributed tests. The suite runs twice: as one process (a world of one) and
// under `mpirun -np 2` (tests/CMakeLists.txt); tests that need several ranks skip themselves
// in the first run, and the others check that a world of one behaves like plain training.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"

namespace qflow::distributed::testing {

inline ProcessGroup& world() { return ProcessGroup::world(); }

#define QFLOW_NEEDS_RANKS(n)                                                                    \
  do {                                                                                          \
    if (::qflow::distributed::ProcessGroup::world().size() < (n))                               \
      GTEST_SKIP() << "needs " << (n) << " ranks (run under mpirun -np " << (n) << ")";          \
  } while (0)

/// True when `t` holds the same bytes on every rank (rank 0's copy is broadcast and compared).
inline bool same_on_all_ranks(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor mine = t.contiguous().clone();
  Tensor theirs = mine.clone();
  world().broadcast(theirs, 0, "same_on_all_ranks");
  const bool same = std::memcmp(mine.raw_data(), theirs.raw_data(), mine.nbytes()) == 0;
  // Every rank must agree on the answer, or ranks would take different paths afterwards.
  return world().sum(int64_t{same ? 0 : 1}, "same_on_all_ranks verdict") == 0;
}

/// Rows [rank, rank + R, ...] of a global batch: this rank's share (Note [Sharded epochs]).
inline Tensor shard_rows(const Tensor& global) {
  const int64_t r = world().rank(), n = world().size();
  std::vector<int64_t> rows;
  for (int64_t i = r; i < global.sizes()[0]; i += n) rows.push_back(i);
  return global.index_select(0, from_vector<int64_t>(rows));
}

// Conv → ReLU → Conv → ReLU → Linear; with `bn` a BatchNorm after each convolution.
inline nn::ModulePtr small_net(bool bn) {
  manual_seed(42);  // the same initial weights for every instance
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(nn::Conv2d({.in = 3, .out = 6, .kernel = 3, .padding = 1}));
  if (bn) net->push_back(nn::BatchNorm2d({.features = 6}));
  net->push_back(nn::ReLU());
  net->push_back(nn::Conv2d({.in = 6, .out = 4, .kernel = 3, .stride = 2, .padding = 1}));
  if (bn) net->push_back(nn::BatchNorm2d({.features = 4}));
  net->push_back(nn::ReLU());
  net->push_back(nn::Flatten());
  net->push_back(nn::Linear({.in = 4 * 4 * 4, .out = 5}));
  return net;
}

// Step k's global batch, the same on every rank.
inline std::pair<Tensor, Tensor> global_batch(int step, int64_t size) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  return {randn({size, 3, 8, 8}), randint(0, 5, {size})};
}

}  // namespace qflow::distributed::testing
