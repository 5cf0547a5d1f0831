// random_crop_flip_normalize's CPU kernel against the CPU transforms it stands for (Note
// [Augmentation on the device]): bit for bit, over seeds, paddings, flip probabilities, both
// orders of crop and flip, with and without Normalize, odd sizes, one and three channels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>

#include "qflow/core/augment_ops.h"
#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using namespace qflow::data;
using ::testing::HasSubstr;

namespace {

// (n, c, h, w) uint8 images of random bytes.
Tensor random_images(int64_t n, int64_t c, int64_t h, int64_t w, uint32_t seed) {
  Tensor t = empty({n, c, h, w}, DType::UInt8);
  std::mt19937 gen(seed);
  uint8_t* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(gen() & 0xFF);
  return t;
}

struct Case {
  int64_t channels, height, width;
  std::vector<int64_t> crop;  // empty: no RandomCrop
  int64_t padding;
  double fill;
  std::optional<double> flip_p;
  bool flip_first;
  std::vector<double> mean, std;  // empty: no Normalize
};

TransformPtr pipeline(const Case& c) {
  std::vector<TransformPtr> steps;
  TransformPtr crop = c.crop.empty() ? nullptr
                                     : std::make_shared<RandomCrop>(std::array<int64_t, 2>{c.crop[0], c.crop[1]},
                                                                    c.padding, c.fill);
  TransformPtr flip = c.flip_p ? std::make_shared<RandomHorizontalFlip>(*c.flip_p) : nullptr;
  if (c.flip_first && flip) steps.push_back(flip);
  if (crop) steps.push_back(crop);
  if (!c.flip_first && flip) steps.push_back(flip);
  steps.push_back(std::make_shared<ToTensor>());
  if (!c.mean.empty()) steps.push_back(std::make_shared<Normalize>(c.mean, c.std));
  return std::make_shared<Compose>(std::move(steps));
}

Tensor op_batch(const Case& c, const Tensor& images, const Tensor& indices, uint64_t seed) {
  CropFlipNormalizeOptions o;
  o.crop_size = c.crop;
  o.padding = c.padding;
  o.fill = static_cast<int64_t>(static_cast<uint8_t>(std::clamp(c.fill, 0.0, 255.0)));  // as RandomCrop casts it
  o.flip_p = c.flip_p;
  o.flip_first = c.flip_first && c.flip_p && !c.crop.empty();
  Tensor mean, sd;
  if (!c.mean.empty()) {
    std::vector<float> m, s;
    for (double v : c.mean) m.push_back(static_cast<float>(v));
    for (double v : c.std) s.push_back(static_cast<float>(v));
    mean = from_vector<float>(m, {static_cast<int64_t>(m.size())});
    sd = from_vector<float>(s, {static_cast<int64_t>(s.size())});
  }
  return random_crop_flip_normalize(images, indices, seed, o, mean, sd);
}

// Compares every sample of the op's batch with the transforms applied to the same image.
void expect_equal_to_transforms(const Case& c, uint64_t seed) {
  const int64_t n = 9;
  const Tensor images = random_images(n, c.channels, c.height, c.width, static_cast<uint32_t>(seed * 31 + 7));
  const std::vector<int64_t> idx = {4, 0, 8, 4, 3, 7, 1};
  const Tensor got = op_batch(c, images, from_vector<int64_t>(idx, {7}), seed);
  const TransformPtr t = pipeline(c);
  ASSERT_EQ(got.dim(), 4);
  ASSERT_EQ(got.sizes()[0], 7);
  for (size_t b = 0; b < idx.size(); ++b) {
    SampleRng rng(seed, static_cast<uint64_t>(idx[b]));
    const Tensor want = t->apply(images.select(0, idx[b]), rng).contiguous();
    const Tensor row = got.select(0, static_cast<int64_t>(b)).contiguous();
    ASSERT_EQ(row.sizes(), want.sizes()) << t->repr();
    ASSERT_EQ(want.dtype(), DType::Float32);
    EXPECT_EQ(std::memcmp(row.data_ptr<float>(), want.data_ptr<float>(), static_cast<size_t>(want.numel()) * 4), 0)
        << t->repr() << " seed " << seed << " sample " << idx[b];
  }
}

TEST(AugmentOpTest, EqualsTheCpuTransformsBitForBit) {
  const std::vector<double> m3 = {0.4914, 0.4822, 0.4465}, s3 = {0.247, 0.243, 0.261};
  std::vector<Case> cases;
  for (int64_t channels : {1, 3})
    for (int64_t padding : {0, 4})
      for (std::optional<double> p : {std::optional<double>(), std::optional<double>(0.0),
                                       std::optional<double>(0.5), std::optional<double>(1.0)})
        for (bool norm : {false, true})
          for (bool flip_first : {false, true}) {
            if (flip_first && !p) continue;
            std::vector<double> mean, std;
            if (norm) {
              mean = channels == 3 ? m3 : std::vector<double>{0.2860};
              std = channels == 3 ? s3 : std::vector<double>{0.3530};
            }
            // Odd sizes: a 7x5 crop of a 9x11 image (with padding, beyond its edges).
            cases.push_back({channels, 9, 11, {7, 5}, padding, 17.0, p, flip_first, mean, std});
          }
  // No crop; a crop of the whole image; a crop larger than the image (only inside the padding).
  cases.push_back({3, 6, 5, {}, 0, 0, 0.5, false, {}, {}});
  cases.push_back({1, 6, 5, {6, 5}, 0, 0, 0.5, false, {0.5}, {0.25}});
  cases.push_back({3, 6, 5, {9, 8}, 2, 300.0, 0.5, true, {0.5}, {0.25}});
  cases.push_back({3, 6, 5, {}, 0, 0, std::nullopt, false, {}, {}});
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{0x9E3779B97F4A7C15ull}})
    for (const Case& c : cases) expect_equal_to_transforms(c, seed);
}

TEST(AugmentOpTest, ShapeRuleMatchesTheKernel) {
  const Tensor images = random_images(3, 3, 8, 8, 1);
  CropFlipNormalizeOptions o{.crop_size = {5, 6}, .padding = 2, .flip_p = 0.5};
  const OpDef& def = OpRegistry::instance().get("random_crop_flip_normalize");
  const Tensor out = random_crop_flip_normalize(images, from_vector<int64_t>({2, 1}, {2}), 5, o);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 3, 5, 6}));
  EXPECT_EQ(out.dtype(), DType::Float32);
  EXPECT_FALSE(def.schema.to_string().empty());
}

using testing_util::error_of;

TEST(AugmentOpTest, RefusesWrongDtypesShapesAndIndices) {
  const Tensor images = random_images(4, 3, 8, 8, 2);
  const Tensor idx = from_vector<int64_t>({0, 3}, {2});
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images.to(DType::Float32), idx, 0); }),
              HasSubstr("images must be uint8"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images.select(0, 0), idx, 0); }),
              HasSubstr("images must be (N, C, H, W)"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx.to(DType::Int32), 0); }),
              HasSubstr("indices must be int64"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, from_vector<int64_t>({0, 4}, {2}), 0); }),
              HasSubstr("index 4 (at position 1) is out of range for a data set of 4 images"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, from_vector<int64_t>({-1}, {1}), 0); }),
              HasSubstr("out of range"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {.crop_size = {13, 8}, .padding = 2}); }),
              HasSubstr("larger than the padded image"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {.padding = 2}); }),
              HasSubstr("without a crop_size"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {.crop_size = {4, 4}, .fill = 256}); }),
              HasSubstr("fill must be a uint8 value"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {.flip_p = 1.5}); }),
              HasSubstr("flip_p must be in [0, 1]"));
  const Tensor two = from_vector<float>({0.5f, 0.5f}, {2});
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {}, two, two); }),
              HasSubstr("must have 1 or 3 (the channels) entries"));
  const Tensor one = from_vector<float>({0.5f}, {1});
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {}, one, Tensor()); }),
              HasSubstr("both mean and std"));
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, idx, 0, {}, one.to(DType::Float64), one); }),
              HasSubstr("mean must be float32"));
}

TEST(AugmentOpTest, HasNoDerivativeAndRefusesAMeanThatRequiresGrad) {
  const Tensor images = random_images(2, 1, 4, 4, 3);
  Tensor mean = from_vector<float>({0.5f}, {1});
  mean.requires_grad_(true);
  const Tensor sd = from_vector<float>({0.25f}, {1});
  EXPECT_THAT(error_of([&] { random_crop_flip_normalize(images, from_vector<int64_t>({1}, {1}), 0, {}, mean, sd); }),
              HasSubstr("random_crop_flip_normalize"));
}

}  // namespace
