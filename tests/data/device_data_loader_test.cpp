// DeviceDataLoader on the CPU device against DataLoader: the same batches bit for bit (Note
// [Data on the device]) across epochs, shuffling, shards, drop_last and a short last batch;
// and its refusals. tests/cuda/augment_test.cpp runs the same comparison on a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using namespace qflow::data;
using ::testing::HasSubstr;

namespace {

// n random uint8 images (c, h, w), label i % 7.
class RandomImages final : public Dataset {
 public:
  RandomImages(int64_t n, int64_t c, int64_t h, int64_t w, DType dtype = DType::UInt8)
      : images_(empty({n, c, h, w}, DType::UInt8)), dtype_(dtype), names_(7, "k") {
    std::mt19937 gen(static_cast<uint32_t>(n * 131 + c));
    uint8_t* p = images_.data_ptr<uint8_t>();
    for (int64_t i = 0; i < images_.numel(); ++i) p[i] = static_cast<uint8_t>(gen() & 0xFF);
  }
  int64_t size() const override { return images_.sizes()[0]; }
  Example get(int64_t i) const override {
    Tensor img = images_.select(0, i);
    return {dtype_ == DType::UInt8 ? img : img.to(dtype_), i % 7};
  }
  const std::vector<std::string>& class_names() const override { return names_; }

 private:
  Tensor images_;
  DType dtype_;
  std::vector<std::string> names_;
};

TransformPtr cifar_like(int64_t size) {
  return std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<RandomCrop>(size, 4), std::make_shared<RandomHorizontalFlip>(), std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.49, 0.48, 0.45}, std::vector<double>{0.25, 0.24, 0.26})});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Two epochs of both loaders, batch by batch.
void expect_same_epochs(std::shared_ptr<const Dataset> ds, const DataLoaderOptions& options) {
  DataLoader cpu(ds, options);
  DeviceDataLoader dev(ds, options, Device::cpu());
  ASSERT_EQ(dev.size(), cpu.size());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<Batch> want, got;
    for (Batch& b : cpu) want.push_back(b);
    for (Batch& b : dev) got.push_back(b);
    ASSERT_EQ(got.size(), want.size()) << "epoch " << epoch;
    ASSERT_EQ(static_cast<int64_t>(got.size()), cpu.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(same_bits(got[i].images, want[i].images)) << "epoch " << epoch << " batch " << i;
      EXPECT_TRUE(same_bits(got[i].labels, want[i].labels)) << "epoch " << epoch << " batch " << i;
    }
  }
  EXPECT_EQ(dev.epoch(), cpu.epoch());
}

TEST(DeviceDataLoaderTest, EqualsDataLoaderWithShuffleAndAShortLastBatch) {
  auto ds = std::make_shared<RandomImages>(23, 3, 10, 10);
  expect_same_epochs(ds, {.batch_size = 5, .shuffle = true, .seed = 11, .transform = cifar_like(8)});
  expect_same_epochs(ds, {.batch_size = 5, .shuffle = true, .seed = 11, .drop_last = true, .transform = cifar_like(8)});
}

TEST(DeviceDataLoaderTest, EqualsDataLoaderOnAShardWithoutShuffle) {
  auto ds = std::make_shared<RandomImages>(23, 3, 9, 9);
  for (int64_t rank : {0, 2})
    for (bool drop_last : {false, true})
      expect_same_epochs(ds, {.batch_size = 3, .shuffle = rank == 2, .seed = 5, .drop_last = drop_last,
                              .sampler = {.num_replicas = 3, .rank = rank}, .transform = cifar_like(9)});
}

TEST(DeviceDataLoaderTest, EqualsDataLoaderForOtherPipelines) {
  auto gray = std::make_shared<RandomImages>(13, 1, 7, 9);
  // No transform (uint8 scaled to [0, 1]); flip before crop; crop without flip; flip alone.
  expect_same_epochs(gray, {.batch_size = 4, .shuffle = true, .seed = 3});
  expect_same_epochs(gray, {.batch_size = 4, .shuffle = true, .seed = 3,
                            .transform = std::make_shared<Compose>(std::vector<TransformPtr>{
                                std::make_shared<RandomHorizontalFlip>(0.5),
                                std::make_shared<RandomCrop>(std::array<int64_t, 2>{5, 6}, 2, 40.0),
                                std::make_shared<ToTensor>(),
                                std::make_shared<Normalize>(std::vector<double>{0.3}, std::vector<double>{0.7})})});
  expect_same_epochs(gray, {.batch_size = 4, .seed = 8, .transform = std::make_shared<RandomCrop>(5, 1)});
  expect_same_epochs(gray, {.batch_size = 13, .shuffle = true, .transform = std::make_shared<RandomHorizontalFlip>(1.0)});
}

TEST(DeviceDataLoaderTest, SetEpochResumesAnEpoch) {
  auto ds = std::make_shared<RandomImages>(10, 3, 8, 8);
  const DataLoaderOptions options{.batch_size = 4, .shuffle = true, .seed = 2, .transform = cifar_like(8)};
  DataLoader cpu(ds, options);
  DeviceDataLoader dev(ds, options, Device::cpu());
  cpu.set_epoch(5);
  dev.set_epoch(5);
  std::vector<Batch> want;
  for (Batch& b : cpu) want.push_back(b);
  size_t i = 0;
  for (Batch& b : dev) {
    ASSERT_LT(i, want.size());
    EXPECT_TRUE(same_bits(b.images, want[i].images)) << i;
    EXPECT_TRUE(same_bits(b.labels, want[i].labels)) << i;
    ++i;
  }
  EXPECT_EQ(i, want.size());
  EXPECT_EQ(dev.epoch(), 6u);
}

TEST(DeviceDataLoaderTest, WorksThroughTheBatchLoaderInterface) {
  auto ds = std::make_shared<RandomImages>(7, 3, 8, 8);
  std::unique_ptr<BatchLoader> loader =
      std::make_unique<DeviceDataLoader>(ds, DataLoaderOptions{.batch_size = 3}, Device::cpu());
  int64_t seen = 0;
  for (Batch& b : *loader) seen += b.size();
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(DeviceDataLoader::bytes_needed(*ds), 7 * (3 * 8 * 8 + 8));
}

using testing_util::error_of;

TEST(DeviceDataLoaderTest, RefusesWhatTheDeviceCannotRun) {
  auto ds = std::make_shared<RandomImages>(6, 3, 8, 8);
  auto make = [&](TransformPtr t) {
    return error_of([&] { DeviceDataLoader(ds, {.batch_size = 2, .transform = std::move(t)}, Device::cpu()); });
  };
  EXPECT_THAT(make(std::make_shared<Pad>(std::vector<int64_t>{2})),
              HasSubstr("cannot run Pad(padding=[2, 2, 2, 2], fill=0) on the device"));
  EXPECT_THAT(make(std::make_shared<Compose>(std::vector<TransformPtr>{std::make_shared<ToTensor>(),
                                                                       std::make_shared<RandomCrop>(6)})),
              HasSubstr("it comes after ToTensor"));
  EXPECT_THAT(make(std::make_shared<Compose>(std::vector<TransformPtr>{std::make_shared<RandomCrop>(6),
                                                                       std::make_shared<RandomCrop>(4)})),
              HasSubstr("second RandomCrop"));
  EXPECT_THAT(make(std::make_shared<ToTensor>(ImageLayout::HWC)), HasSubstr("(H, W, C)"));
  EXPECT_THAT(make(std::make_shared<Normalize>(std::vector<double>{0.5}, std::vector<double>{0.5})),
              HasSubstr("before ToTensor"));
  EXPECT_EQ(DeviceDataLoader::unsupported_reason(*ds, cifar_like(8).get()), "");
  EXPECT_THAT(DeviceDataLoader::unsupported_reason(*ds, std::make_shared<Pad>(std::vector<int64_t>{1}).get()),
              HasSubstr("Pad"));
}

TEST(DeviceDataLoaderTest, RefusesFloatImagesAndAnEmptyDataSet) {
  auto floats = std::make_shared<RandomImages>(4, 3, 8, 8, DType::Float32);
  EXPECT_THAT(error_of([&] { DeviceDataLoader(floats, {.batch_size = 2}, Device::cpu()); }),
              HasSubstr("holds uint8 images (C, H, W), but sample 0 is float32"));
  auto none = std::make_shared<RandomImages>(0, 3, 8, 8);
  EXPECT_THAT(error_of([&] { DeviceDataLoader(none, {.batch_size = 2}, Device::cpu()); }),
              HasSubstr("the data set is empty"));
  EXPECT_EQ(DeviceDataLoader::bytes_needed(*none), 0);
}

}  // namespace
