// random_crop_flip_normalize's CUDA kernel against its CPU kernel, and DeviceDataLoader on the
// GPU against the CPU DataLoader: bit for bit (Note [Augmentation on the device], Note [Data on
// the device]). Both devices compile the same draws and pixel arithmetic (crop_flip_draws.h),
// and division is correctly rounded on both (no fast-math), so no tolerance is needed.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/core/augment_ops.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::testing;

namespace {

Tensor random_images(int64_t n, int64_t c, int64_t h, int64_t w, uint32_t seed) {
  Tensor t = empty({n, c, h, w}, DType::UInt8);
  std::mt19937 gen(seed);
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(gen() & 0xFF);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

TEST(CudaAugmentTest, EqualsTheCpuKernelBitForBit) {
  QFLOW_REQUIRE_CUDA();
  for (int64_t channels : {1, 3}) {
    const Tensor images = random_images(37, channels, 11, 9, static_cast<uint32_t>(channels));
    const Tensor images_gpu = images.to(gpu());
    std::mt19937 gen(7);
    std::vector<int64_t> idx(300);
    for (int64_t& i : idx) i = static_cast<int64_t>(gen() % 37);
    const Tensor index = from_vector<int64_t>(idx, {300});
    const Tensor index_gpu = index.to(gpu());
    const std::vector<float> m = channels == 3 ? std::vector<float>{0.49f, 0.48f, 0.45f} : std::vector<float>{0.29f};
    const std::vector<float> s = channels == 3 ? std::vector<float>{0.25f, 0.24f, 0.26f} : std::vector<float>{0.35f};
    const Tensor mean = from_vector<float>(m, {channels}), sd = from_vector<float>(s, {channels});
    for (uint64_t seed : {uint64_t{0}, uint64_t{12345}, uint64_t{0xFFFFFFFFFFFFFFFFull}})
      for (int64_t padding : {0, 4})
        for (double p : {0.0, 0.5, 1.0})
          for (bool flip_first : {false, true})
            for (bool norm : {false, true}) {
              const CropFlipNormalizeOptions o{.crop_size = {9, 7}, .padding = padding, .fill = 3, .flip_p = p,
                                               .flip_first = flip_first};
              const Tensor want =
                  random_crop_flip_normalize(images, index, seed, o, norm ? mean : Tensor(), norm ? sd : Tensor());
              const Tensor got = random_crop_flip_normalize(images_gpu, index_gpu, seed, o,
                                                            norm ? mean.to(gpu()) : Tensor(), norm ? sd.to(gpu()) : Tensor());
              EXPECT_TRUE(got.device().is_cuda());
              EXPECT_TRUE(same_bits(got, want)) << "channels " << channels << " seed " << seed << " padding "
                                                << padding << " p " << p << " flip_first " << flip_first << " norm "
                                                << norm;
            }
    // Neither crop nor flip: gather, scale and normalise only.
    EXPECT_TRUE(same_bits(random_crop_flip_normalize(images_gpu, index_gpu, 3, {}, mean.to(gpu()), sd.to(gpu())),
                          random_crop_flip_normalize(images, index, 3, {}, mean, sd)));
  }
}

TEST(CudaAugmentTest, ChecksArgumentsBeforeLaunching) {
  QFLOW_REQUIRE_CUDA();
  const Tensor images = random_images(4, 3, 8, 8, 1).to(gpu());
  const Tensor index = from_vector<int64_t>({0, 1}, {2}).to(gpu());
  EXPECT_THROW(random_crop_flip_normalize(images.to(DType::Float32), index, 0), Error);
  EXPECT_THROW(random_crop_flip_normalize(images, index, 0, {.crop_size = {20, 20}}), Error);
  // Tensors on two devices are refused by the dispatcher, naming the op.
  EXPECT_THROW(random_crop_flip_normalize(images, from_vector<int64_t>({0}, {1}), 0), Error);
  EXPECT_EQ(random_crop_flip_normalize(images, from_vector<int64_t>(std::vector<int64_t>{}, {0}).to(gpu()), 0).numel(), 0);
}

class RandomImages final : public data::Dataset {
 public:
  explicit RandomImages(int64_t n) : images_(random_images(n, 3, 32, 32, 99)), names_(10, "k") {}
  int64_t size() const override { return images_.sizes()[0]; }
  data::Example get(int64_t i) const override { return {images_.select(0, i), i % 10}; }
  const std::vector<std::string>& class_names() const override { return names_; }

 private:
  Tensor images_;
  std::vector<std::string> names_;
};

TEST(CudaAugmentTest, DeviceDataLoaderOnTheGpuEqualsTheCpuDataLoader) {
  QFLOW_REQUIRE_CUDA();
  auto ds = std::make_shared<RandomImages>(1000);
  auto transform = std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
      std::make_shared<data::RandomCrop>(32, 4), std::make_shared<data::RandomHorizontalFlip>(),
      std::make_shared<data::ToTensor>(),
      std::make_shared<data::Normalize>(std::vector<double>{0.4914, 0.4822, 0.4465},
                                        std::vector<double>{0.2470, 0.2435, 0.2616})});
  const data::DataLoaderOptions options{.batch_size = 128, .shuffle = true, .seed = 4, .num_workers = 2,
                                        .transform = transform};
  data::DataLoader cpu(ds, options);
  data::DeviceDataLoader dev(ds, options, gpu());
  ASSERT_EQ(dev.size(), cpu.size());
  for (uint64_t epoch : {uint64_t{0}, uint64_t{3}}) {
    cpu.set_epoch(epoch);
    dev.set_epoch(epoch);
    std::vector<data::Batch> want;
    for (data::Batch& b : cpu) want.push_back(b);
    size_t i = 0;
    for (data::Batch& b : dev) {
      ASSERT_LT(i, want.size());
      EXPECT_TRUE(b.images.device().is_cuda());
      EXPECT_TRUE(b.labels.device().is_cuda());
      EXPECT_TRUE(same_bits(b.images, want[i].images)) << "epoch " << epoch << " batch " << i;
      EXPECT_TRUE(same_bits(b.labels, want[i].labels)) << "epoch " << epoch << " batch " << i;
      ++i;
    }
    EXPECT_EQ(i, want.size());
  }
}

}  // namespace
