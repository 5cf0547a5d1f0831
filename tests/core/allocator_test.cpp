// The caching allocator behind Storage (Note [Caching allocator]): size classes, reuse,
// statistics, the cache limit and concurrent use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "qflow/qflow.h"

namespace qflow {
namespace {

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_limit_ = allocator_stats().cache_limit_bytes;
    set_allocator_cache_limit(size_t{1} << 30);
    empty_allocator_cache();
    reset_allocator_stats();
  }
  void TearDown() override { set_allocator_cache_limit(saved_limit_); }
  size_t saved_limit_ = 0;
};

TEST_F(AllocatorTest, FreedBlockIsReusedBySameSizeClass) {
  const size_t n = size_t{1} << 20;
  void* a = allocator_allocate(n);
  allocator_free(a, n);
  EXPECT_EQ(allocator_stats().cached_bytes, n);
  // 1 MiB - 100 bytes is in the 1 MiB class (steps of 64 KiB below 1 MiB): the same block.
  void* b = allocator_allocate(n - 100);
  EXPECT_EQ(b, a);
  // 1 MiB + 1 is in the next class up (1 MiB + 128 KiB): a miss, a new block.
  void* c = allocator_allocate(n + 1);
  EXPECT_NE(c, a);
  const AllocatorStats s = allocator_stats();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.hits, 1u);
  allocator_free(b, n - 100);
  allocator_free(c, n + 1);
}

TEST_F(AllocatorTest, SizeClassesHaveAtMostOneEighthSlack) {
  const size_t n = (size_t{1} << 20) + 1;  // class: 1 MiB + 128 KiB
  void* a = allocator_allocate(n);
  allocator_free(a, n);
  EXPECT_EQ(allocator_stats().cached_bytes, (size_t{1} << 20) + (size_t{1} << 17));
  void* b = allocator_allocate((size_t{1} << 20) + (size_t{1} << 17));  // the class's largest size
  EXPECT_EQ(b, a);
  EXPECT_EQ(allocator_stats().hits, 1u);
  allocator_free(b, (size_t{1} << 20) + (size_t{1} << 17));
}

TEST_F(AllocatorTest, TrainingLikeLoopHitsAfterFirstRound) {
  const std::vector<size_t> sizes = {size_t{3} << 20, size_t{200} << 10, size_t{5} << 20, size_t{64} << 10};
  for (int step = 0; step < 4; ++step) {
    std::vector<void*> blocks;
    for (size_t n : sizes) {
      blocks.push_back(allocator_allocate(n));
      std::memset(blocks.back(), step, n);  // usable for its whole requested size
    }
    for (size_t i = 0; i < sizes.size(); ++i) allocator_free(blocks[i], sizes[i]);
  }
  const AllocatorStats s = allocator_stats();
  EXPECT_EQ(s.requests, 16u);
  EXPECT_EQ(s.hits, 12u);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.75);
  EXPECT_EQ(s.in_use_bytes, 0u);
}

TEST_F(AllocatorTest, SmallBlocksAreNotCached) {
  void* a = allocator_allocate(1000);
  allocator_free(a, 1000);
  EXPECT_EQ(allocator_stats().cached_bytes, 0u);
  EXPECT_EQ(allocator_stats().requests, 0u);
}

TEST_F(AllocatorTest, LimitBoundsCachedBytesAndZeroDisablesCaching) {
  const size_t n = size_t{1} << 20;
  set_allocator_cache_limit(n + n / 2);
  void* a = allocator_allocate(n);
  void* b = allocator_allocate(n);
  allocator_free(a, n);
  allocator_free(b, n);  // would make 2 MiB cached: returned to the system instead
  EXPECT_EQ(allocator_stats().cached_bytes, n);
  set_allocator_cache_limit(0);  // evicts what is cached
  EXPECT_EQ(allocator_stats().cached_bytes, 0u);
  void* c = allocator_allocate(n);
  allocator_free(c, n);
  EXPECT_EQ(allocator_stats().cached_bytes, 0u);
}

TEST_F(AllocatorTest, EmptyCacheReturnsEverything) {
  for (size_t k = 1; k <= 4; ++k) allocator_free(allocator_allocate(k << 20), k << 20);
  EXPECT_EQ(allocator_stats().cached_bytes, size_t{10} << 20);
  empty_allocator_cache();
  EXPECT_EQ(allocator_stats().cached_bytes, 0u);
}

TEST_F(AllocatorTest, PeakInUseTracksTheHighWaterMark) {
  const size_t n = size_t{1} << 20;
  const uint64_t base = allocator_stats().in_use_bytes;
  void* a = allocator_allocate(n);
  void* b = allocator_allocate(n);
  allocator_free(a, n);
  allocator_free(b, n);
  EXPECT_EQ(allocator_stats().peak_in_use_bytes, base + 2 * n);
  EXPECT_EQ(allocator_stats().in_use_bytes, base);
}

TEST_F(AllocatorTest, TensorsRecycleStorageAndKeepValues) {
  const Tensor a = full({512, 512}, 1.5f);
  const void* first = a.data_ptr<float>();
  { Tensor tmp = full({512, 512}, 2.0f); }  // freed to the cache
  const Tensor b = full({512, 512}, 3.0f);   // reuses tmp's block: must hold its own values
  EXPECT_NE(b.data_ptr<float>(), first);
  EXPECT_FLOAT_EQ(a.data_ptr<float>()[512 * 512 - 1], 1.5f);
  EXPECT_FLOAT_EQ(b.data_ptr<float>()[0], 3.0f);
  EXPECT_GE(allocator_stats().hits, 1u);
}

TEST_F(AllocatorTest, ConcurrentAllocationsAreConsistent) {
  const uint64_t base = allocator_stats().in_use_bytes;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) {
        const size_t n = (size_t{64} << 10) * static_cast<size_t>(1 + (i + t) % 5);
        auto* p = static_cast<unsigned char*>(allocator_allocate(n));
        std::memset(p, t, n);
        ASSERT_EQ(p[n - 1], static_cast<unsigned char>(t));
        allocator_free(p, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  const AllocatorStats s = allocator_stats();
  EXPECT_EQ(s.requests, 800u);
  EXPECT_GT(s.hits, 700u);
  EXPECT_EQ(s.in_use_bytes, base);
}

}  // namespace
}  // namespace qflow
