// DataLoader: batching, shuffling, determinism across worker counts, shutdown, errors.
#include <atomic>
#include <cmath>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

// Sample i: a (3, 8, 8) uint8 image filled with i % 256 (pixel (c, y, x) += c + y + x), label
// i % 10. Optionally throws at one index, or sleeps to shuffle worker finishing order.
class SyntheticDataset final : public Dataset {
 public:
  explicit SyntheticDataset(int64_t n, int64_t throw_at = -1, bool jitter = false)
      : n_(n), throw_at_(throw_at), jitter_(jitter), names_(10, "c") {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    QFLOW_CHECK(i != throw_at_, "SyntheticDataset: sample {} is broken", i);
    if (jitter_) std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 300));
    ++gets;
    Tensor img = empty({3, 8, 8}, DType::UInt8);
    uint8_t* p = img.data_ptr<uint8_t>();
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < 64; ++k) p[c * 64 + k] = static_cast<uint8_t>(i + c + k / 8 + k % 8);
    return {img, i % 10};
  }
  const std::vector<std::string>& class_names() const override { return names_; }
  mutable std::atomic<int64_t> gets{0};

 private:
  int64_t n_, throw_at_;
  bool jitter_;
  std::vector<std::string> names_;
};

TransformPtr augmentation() {
  return std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<RandomCrop>(8, 2), std::make_shared<RandomHorizontalFlip>(), std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.5}, std::vector<double>{0.2})});
}

std::vector<Batch> run_epoch(DataLoader& loader) {
  std::vector<Batch> out;
  for (Batch& b : loader) out.push_back(b);
  return out;
}

std::vector<int64_t> all_labels(const std::vector<Batch>& batches) {
  std::vector<int64_t> out;
  for (const Batch& b : batches)
    for (int64_t l : to_vector<int64_t>(b.labels)) out.push_back(l);
  return out;
}

TEST(DataLoaderTest, SequentialBatchesWithPartialLastBatch) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  DataLoader loader(ds, {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  const std::vector<Batch> batches = run_epoch(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].images.sizes(), (std::vector<int64_t>{4, 3, 8, 8}));
  EXPECT_EQ(batches[0].images.dtype(), DType::Float32);
  EXPECT_EQ(batches[2].images.sizes(), (std::vector<int64_t>{2, 3, 8, 8}));
  EXPECT_EQ(batches[2].labels.dtype(), DType::Int64);
  EXPECT_EQ(all_labels(batches), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Without a transform uint8 samples are scaled to [0, 1]: sample 5, channel 2, pixel (1, 3).
  EXPECT_FLOAT_EQ(batches[1].images.data_ptr<float>()[1 * 192 + 2 * 64 + 1 * 8 + 3], (5 + 2 + 1 + 3) / 255.0f);
}

TEST(DataLoaderTest, DropLastDropsTheShortBatch) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  DataLoader loader(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(all_labels(run_epoch(loader)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoaderTest, ShuffleIsAPermutationThatChangesPerEpochAndRepeatsPerSeed) {
  auto ds = std::make_shared<SyntheticDataset>(50);
  auto order = [&](uint64_t seed, uint64_t epoch) {
    DataLoader loader(ds, {.batch_size = 7, .shuffle = true, .seed = seed});
    loader.set_epoch(epoch);
    std::vector<int64_t> firsts;
    for (Batch& b : loader)
      for (int64_t i = 0; i < b.size(); ++i) firsts.push_back(static_cast<int64_t>(std::lround(b.images.data_ptr<float>()[i * 192] * 255)));
    return firsts;  // pixel 0 of sample i is i
  };
  const std::vector<int64_t> e0 = order(3, 0);
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(e0, identity);
  EXPECT_EQ(order(3, 0), e0);
  EXPECT_NE(order(3, 1), e0);
  EXPECT_NE(order(4, 0), e0);
}

TEST(DataLoaderTest, EpochsAdvanceByThemselvesAndSetEpochResumes) {
  auto ds = std::make_shared<SyntheticDataset>(30);
  DataLoader loader(ds, {.batch_size = 30, .shuffle = true, .seed = 9});
  const auto e0 = all_labels(run_epoch(loader));
  const auto e1 = all_labels(run_epoch(loader));
  EXPECT_EQ(loader.epoch(), 2u);
  EXPECT_NE(e0, e1);
  loader.set_epoch(1);
  EXPECT_EQ(all_labels(run_epoch(loader)), e1);
}

// The central guarantee: see Note [Deterministic loading].
TEST(DataLoaderTest, BatchesAreIdenticalForZeroOneAndThreeWorkers) {
  auto ds = std::make_shared<SyntheticDataset>(103, -1, /*jitter=*/true);
  std::vector<std::vector<Batch>> runs;
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = 42, .num_workers = workers, .prefetch = 2,
                           .transform = augmentation()});
    loader.set_epoch(5);
    runs.push_back(run_epoch(loader));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t b = 0; b < runs[0].size(); ++b) {
      ASSERT_EQ(to_vector<float>(runs[r][b].images), to_vector<float>(runs[0][b].images)) << "run " << r << " batch " << b;
      ASSERT_EQ(to_vector<int64_t>(runs[r][b].labels), to_vector<int64_t>(runs[0][b].labels));
    }
  }
  EXPECT_EQ(runs[0].size(), 13u);
}

TEST(DataLoaderTest, AugmentationDependsOnSampleNotOnBatching) {
  // Sample 17 gets the same augmentation whatever the batch size it lands in.
  auto ds = std::make_shared<SyntheticDataset>(20);
  auto sample17 = [&](int64_t batch_size) {
    DataLoader loader(ds, {.batch_size = batch_size, .seed = 1, .transform = augmentation()});
    const std::vector<Batch> batches = run_epoch(loader);
    const Batch& b = batches[static_cast<size_t>(17 / batch_size)];
    const float* p = b.images.data_ptr<float>() + (17 % batch_size) * 192;
    return std::vector<float>(p, p + 192);
  };
  EXPECT_EQ(sample17(1), sample17(5));
  EXPECT_EQ(sample17(5), sample17(20));
}

TEST(DataLoaderTest, PrefetchWindowBoundsWorkAhead) {
  auto ds = std::make_shared<SyntheticDataset>(1000);
  DataLoader loader(ds, {.batch_size = 10, .num_workers = 2, .prefetch = 1});
  loader.start_epoch();
  ASSERT_TRUE(loader.next());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Consumed 1 batch; at most window (2 workers * 1) more batches may exist or be in progress.
  EXPECT_LE(ds->gets.load(), (1 + 2) * 10);
}

TEST(DataLoaderTest, DestroyingMidEpochStopsWorkersCleanly) {
  auto ds = std::make_shared<SyntheticDataset>(5000, -1, true);
  for (int workers : {1, 3}) {
    auto loader = std::make_unique<DataLoader>(ds, DataLoaderOptions{.batch_size = 16, .num_workers = workers});
    auto it = loader->begin();
    ++it;
    EXPECT_EQ(it->size(), 16);
    loader.reset();  // joins the workers without draining the epoch
  }
  // Restarting an epoch in the middle of one is fine too.
  DataLoader loader(ds, {.batch_size = 16, .num_workers = 2});
  loader.start_epoch();
  loader.next();
  EXPECT_EQ(run_epoch(loader).size(), 313u);
}

TEST(DataLoaderTest, WorkerExceptionsReachTheCallerInBatchOrder) {
  auto ds = std::make_shared<SyntheticDataset>(100, /*throw_at=*/37);
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, {.batch_size = 10, .num_workers = workers});
    int64_t delivered = 0;
    const std::string msg = error_of([&] {
      for (Batch& b : loader) delivered += b.size();
    });
    EXPECT_EQ(msg, "SyntheticDataset: sample 37 is broken") << workers;
    EXPECT_EQ(delivered, 30) << workers;  // batches 0..2 arrive, batch 3 holds sample 37
    EXPECT_FALSE(loader.next().has_value());  // the failed epoch is over
    EXPECT_EQ(error_of([&] { run_epoch(loader); }), "SyntheticDataset: sample 37 is broken");
  }
}

TEST(DataLoaderTest, MismatchedSampleShapesAreReported) {
  auto ds = std::make_shared<SyntheticDataset>(4);
  class Grow final : public Transform {
   public:
    Tensor apply(const Tensor& image, SampleRng&) const override {
      return image.data_ptr<uint8_t>()[0] == 2 ? Pad({1})(image) : image;
    }
    std::string repr() const override { return "Grow()"; }
  };
  DataLoader loader(ds, {.batch_size = 4, .transform = std::make_shared<Grow>()});
  EXPECT_EQ(error_of([&] { run_epoch(loader); }),
            "DataLoader: sample 2 has shape [3, 10, 10] but the batch started with shape [3, 8, 8] (add a crop or resize "
            "transform)");
}

TEST(DataLoaderTest, RejectsBadOptions) {
  auto ds = std::make_shared<SyntheticDataset>(4);
  EXPECT_EQ(error_of([&] { DataLoader(ds, {.batch_size = 0}); }), "DataLoader: batch_size must be >= 1, got 0");
  EXPECT_EQ(error_of([&] { DataLoader(ds, {.num_workers = -1}); }), "DataLoader: num_workers must be >= 0, got -1");
  EXPECT_EQ(error_of([&] { DataLoader(nullptr); }), "DataLoader: null dataset");
}

TEST(SubsetTest, SelectsSamplesAndChecksIndices) {
  auto ds = std::make_shared<SyntheticDataset>(10);
  const Subset first(ds, int64_t{3});
  EXPECT_EQ(first.size(), 3);
  EXPECT_EQ(first.get(2).label, 2);
  EXPECT_EQ(Subset(ds, int64_t{99}).size(), 10);
  const Subset picked(ds, std::vector<int64_t>{7, 1});
  EXPECT_EQ(picked.get(0).label, 7);
  EXPECT_EQ(picked.num_classes(), 10);
  EXPECT_EQ(error_of([&] { Subset(ds, std::vector<int64_t>{10}); }), "Subset: index 10 out of range for a dataset of 10 samples");
}

}  // namespace

// ---- DistributedSampler (Note [Sharded epochs]) ---------------------------------------------

namespace {

// The dataset index of every sample of an epoch (no transform: pixel (0, 0, 0) is i / 255).
std::vector<int64_t> indices_of(DataLoader& loader) {
  std::vector<int64_t> out;
  for (Batch& b : loader) {
    const Tensor images = b.images.contiguous();
    const float* p = images.data_ptr<float>();
    for (int64_t k = 0; k < b.size(); ++k) out.push_back(static_cast<int64_t>(std::lround(p[k * 3 * 8 * 8] * 255.0f)));
  }
  return out;
}

}  // namespace

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheEpoch) {
  auto ds = std::make_shared<SyntheticDataset>(23);
  for (const bool pad : {false, true}) {
    std::vector<int64_t> all;
    std::vector<int64_t> sizes;
    for (int64_t r = 0; r < 3; ++r) {
      DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 5, .sampler = {.num_replicas = 3, .rank = r, .pad = pad}});
      const auto mine = indices_of(loader);
      sizes.push_back(static_cast<int64_t>(mine.size()));
      EXPECT_EQ(loader.size(), (sizes.back() + 3) / 4);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::set<int64_t> unique(all.begin(), all.end());
    EXPECT_EQ(unique.size(), 23u);  // every sample of the epoch
    if (pad) {
      EXPECT_EQ(sizes, (std::vector<int64_t>{8, 8, 8}));  // one sample repeated to even the shards
      EXPECT_EQ(all.size(), 24u);
    } else {
      EXPECT_EQ(sizes, (std::vector<int64_t>{8, 8, 7}));  // each sample exactly once
      EXPECT_EQ(all.size(), 23u);
    }
  }
}

TEST(DistributedSampler, RanksTogetherSeeTheOneProcessBatches) {
  // 2 ranks × batch 3 with augmentation: rank r's batch k is rows r, r + 2, r + 4 of one
  // process's batch k of 6, pixel for pixel.
  auto ds = std::make_shared<SyntheticDataset>(24);
  const DataLoaderOptions base{.batch_size = 6, .shuffle = true, .seed = 9, .transform = augmentation()};
  DataLoader whole(ds, base);
  whole.set_epoch(2);
  const auto global = run_epoch(whole);
  for (int64_t r = 0; r < 2; ++r) {
    DataLoaderOptions o = base;
    o.batch_size = 3;
    o.num_workers = 2;
    o.sampler = {.num_replicas = 2, .rank = r};
    DataLoader loader(ds, o);
    loader.set_epoch(2);
    const auto mine = run_epoch(loader);
    ASSERT_EQ(mine.size(), global.size());
    for (size_t k = 0; k < mine.size(); ++k) {
      const Tensor rows = global[k].images.index_select(0, from_vector<int64_t>({r, r + 2, r + 4}));
      EXPECT_EQ(to_vector<float>(mine[k].images), to_vector<float>(rows)) << "rank " << r << " batch " << k;
    }
  }
}

TEST(DistributedSampler, RefusesAnInvalidShard) {
  auto ds = std::make_shared<SyntheticDataset>(4);
  EXPECT_THAT(error_of([&] { DataLoader(ds, {.sampler = {.num_replicas = 2, .rank = 2}}); }),
              HasSubstr("DistributedSampler: rank must be in [0, 2), got 2"));
  EXPECT_THAT(error_of([&] { DataLoader(ds, {.sampler = {.num_replicas = 0}}); }),
              HasSubstr("num_replicas must be >= 1, got 0"));
  // More ranks than samples: padding repeats samples so every rank still has one.
  DataLoader loader(ds, {.sampler = {.num_replicas = 6, .rank = 5}});
  EXPECT_EQ(indices_of(loader), std::vector<int64_t>{1});
}
