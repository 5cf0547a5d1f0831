// VersionedCache (Note [Versioned caches]): a value kept until one of its source tensors is
// written, shared by the deployed layers' float weights and integer forms and the int8 plans.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "qflow/core/versioned_cache.h"
#include "qflow/qflow.h"

namespace qflow {
namespace {

TEST(VersionedCacheTest, ComputesOnceUntilASourceIsWritten) {
  Tensor a = ones({3}), b = full({2}, 2.0);
  VersionedCache<Tensor> cache;
  int computed = 0;
  auto sum = [&] {
    ++computed;
    return a.sum() + b.sum();
  };
  EXPECT_DOUBLE_EQ(cache.get({&a, &b}, sum).item<double>(), 7.0);
  EXPECT_DOUBLE_EQ(cache.get({&a, &b}, sum).item<double>(), 7.0);
  EXPECT_EQ(computed, 1);
  b.add_(1.0);  // an in-place write bumps the version
  EXPECT_DOUBLE_EQ(cache.get({&a, &b}, sum).item<double>(), 9.0);
  EXPECT_EQ(computed, 2);
  Tensor view = a.narrow(0, 0, 1);
  view.fill_(5.0);  // a write through a view is a write of the storage
  EXPECT_DOUBLE_EQ(cache.get({&a, &b}, sum).item<double>(), 13.0);
  EXPECT_EQ(computed, 3);
}

TEST(VersionedCacheTest, AnotherTensorOrAnUndefinedSourceIsAnotherKey) {
  Tensor a = ones({2}), same_values = ones({2}), undefined;
  VersionedCache<Tensor> cache;
  int computed = 0;
  auto make = [&] { return full({}, static_cast<double>(++computed)); };
  (void)cache.get({&a, &undefined}, make);
  (void)cache.get({&a, &undefined}, make);
  EXPECT_EQ(computed, 1);
  (void)cache.get({&same_values, &undefined}, make);  // equal values, another storage
  EXPECT_EQ(computed, 2);
  (void)cache.get({&same_values, &a}, make);  // a source where there was none
  EXPECT_EQ(computed, 3);
  (void)cache.get({&same_values}, make);  // fewer sources
  EXPECT_EQ(computed, 4);
}

TEST(VersionedCacheTest, KeepsNoSourceAliveAndADeadSourceNeverMatches) {
  VersionedCache<int> cache;
  int computed = 0;
  std::weak_ptr<Storage> watched;
  {
    Tensor a = ones({4});
    watched = a.impl()->storage();
    (void)cache.get({&a}, [&] { return ++computed; });
  }
  EXPECT_TRUE(watched.expired()) << "the cache held the source's storage";
  // A new tensor, possibly at the freed storage's address, at the same version: recomputed.
  Tensor b = ones({4});
  (void)cache.get({&b}, [&] { return ++computed; });
  EXPECT_EQ(computed, 2);
}

TEST(VersionedCacheTest, AFailedComputationCachesNothing) {
  Tensor a = ones({2});
  VersionedCache<int> cache;
  EXPECT_THROW(cache.get({&a}, []() -> int { throw std::runtime_error("no"); }), std::runtime_error);
  EXPECT_EQ(cache.get({&a}, [] { return 7; }), 7);
  cache.clear();
  EXPECT_EQ(cache.get({&a}, [] { return 8; }), 8);
}

}  // namespace
}  // namespace qflow
