// The op profiler (Note [Op profiler]): calls counted per op, self time within total time, the
// thread's ops only while it lives, one per thread, and backward ops timed as the engine calls
// them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

std::map<std::string, OpProfileRow> by_op(const OpProfiler& p) {
  std::map<std::string, OpProfileRow> m;
  for (const OpProfileRow& r : p.rows()) m[r.op] = r;
  return m;
}

}  // namespace

TEST(OpProfilerTest, CountsEachOpAndItsTime) {
  const Tensor a = randn({64, 64}), b = randn({64, 64});
  OpProfiler profiler;
  for (int i = 0; i < 3; ++i) (void)(a + b);
  (void)matmul(a, b).sum();
  const auto rows = by_op(profiler);
  ASSERT_TRUE(rows.count("add"));
  EXPECT_EQ(rows.at("add").calls, 3);
  ASSERT_TRUE(rows.count("sum"));
  EXPECT_EQ(rows.at("sum").calls, 1);
  for (const auto& [name, r] : rows) {
    EXPECT_GT(r.total_us, 0.0) << name;
    EXPECT_LE(r.self_us, r.total_us + 1e-9) << name;
    EXPECT_GE(r.self_us, 0.0) << name;
  }
  // Largest self time first; the ops' time fits in the wall time.
  const auto ordered = profiler.rows();
  for (size_t i = 1; i < ordered.size(); ++i) EXPECT_GE(ordered[i - 1].self_us, ordered[i].self_us);
  double self_sum = 0;
  for (const OpProfileRow& r : ordered) self_sum += r.self_us;
  EXPECT_LE(self_sum / 1e6, profiler.wall_seconds());
  const std::string table = profiler.table();
  EXPECT_NE(table.find("add"), std::string::npos) << table;
  EXPECT_NE(table.find("ms in the ops of"), std::string::npos) << table;
}

TEST(OpProfilerTest, SeesTheBackwardOpsTheEngineCalls) {
  Tensor w = randn({8, 8});
  w.requires_grad_(true);
  const Tensor x = randn({4, 8});
  OpProfiler profiler;
  matmul(x, w).relu().sum().backward();
  const auto rows = by_op(profiler);
  EXPECT_TRUE(rows.count("threshold_backward")) << profiler.table(100);
  ASSERT_TRUE(rows.count("matmul")) << profiler.table(100);
  EXPECT_EQ(rows.at("matmul").calls, 2) << profiler.table(100);  // forward, and w's gradient
}

TEST(OpProfilerTest, RecordsNothingBeforeOrAfterItAndNothingOfOtherThreads) {
  const Tensor a = randn({16});
  std::vector<OpProfileRow> rows;
  {
    (void)(a + a);  // before
    OpProfiler profiler;
    std::thread other([&] { (void)(a * a); });
    other.join();
    (void)a.neg();
    rows = profiler.rows();
  }
  (void)(a - a);  // after: no profiler is active (no crash, no record)
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, "neg");
  EXPECT_EQ(rows[0].calls, 1);
}

TEST(OpProfilerTest, OnePerThread) {
  OpProfiler first;
  try {
    OpProfiler second;
    ADD_FAILURE() << "a second profiler on the same thread was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("one OpProfiler per thread"), std::string::npos) << e.message();
  }
  // The first still records.
  (void)randn({4}).abs();
  bool seen = false;
  for (const OpProfileRow& r : first.rows()) seen |= r.op == "abs";
  EXPECT_TRUE(seen);
}
