// Transforms: torchvision goldens for the deterministic ones, exact crops/flips for the random
// ones, and reproducibility of the per-sample streams.
#include <set>

#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

Tensor sample_image() {
  return from_vector<uint8_t>({0, 1, 127, 128, 200, 255, 3, 77, 254, 9, 100, 42}, {3, 2, 2});
}

// (1, 3, 4) image 0..11
Tensor ramp() {
  std::vector<uint8_t> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i);
  return from_vector<uint8_t>(v, {1, 3, 4});
}

TEST(ToTensorTest, ScalesUint8LikeTorchvision) {
  // torchvision ConvertImageDtype(float32) / ToTensor on the same bytes.
  const std::vector<float> golden = {0.0f,         0.00392156886f, 0.498039216f,  0.501960814f,
                                     0.784313738f, 1.0f,           0.0117647061f, 0.301960796f,
                                     0.996078432f, 0.0352941193f,  0.392156869f,  0.164705887f};
  const Tensor t = ToTensor()(sample_image());
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(to_vector<float>(t), golden);
}

TEST(ToTensorTest, HwcAndGrayLayouts) {
  // (H=1, W=2, C=3) interleaved -> planar
  const Tensor hwc = from_vector<uint8_t>({255, 0, 51, 0, 255, 102}, {1, 2, 3});
  const Tensor t = ToTensor(ImageLayout::HWC)(hwc);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(to_vector<float>(t), (std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f, 0.2f, 0.4f}));
  EXPECT_EQ(ToTensor()(from_vector<uint8_t>({0, 255}, {1, 2})).sizes(), (std::vector<int64_t>{1, 1, 2}));
  const Tensor f = from_vector<double>({2.5, -1}, {1, 1, 2});
  EXPECT_EQ(to_vector<float>(ToTensor()(f)), (std::vector<float>{2.5f, -1.0f}));  // no scaling
}

TEST(NormalizeTest, MatchesTorchvisionWithCifarStatistics) {
  const std::vector<float> golden = {-1.9894737f,  -1.97359693f, 0.0268794037f, 0.042756319f,
                                     1.2407136f,   2.12648869f,  -1.9319725f,   -0.740202069f,
                                     2.10083508f,  -1.57188797f, -0.207733706f, -1.07719469f};
  const Normalize norm({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616});
  const std::vector<float> got = to_vector<float>(norm(ToTensor()(sample_image())));
  ASSERT_EQ(got.size(), golden.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], golden[i]) << i;
}

TEST(NormalizeTest, RejectsBadArguments) {
  EXPECT_EQ(error_of([] { Normalize({0.5}, {0.0}); }), "Normalize: std [0] contains a zero");
  EXPECT_THAT(error_of([] { Normalize({0.5, 0.5}, {1.0}); }), HasSubstr("same number (>= 1) of entries, got 2 and 1"));
  EXPECT_EQ(error_of([] { Normalize({0.5, 0.5}, {1.0, 1.0})(zeros({3, 2, 2})); }),
            "Normalize: 2 mean/std entries for an image of 3 channels");
  EXPECT_EQ(error_of([] { Normalize({0.5}, {1.0})(sample_image()); }),
            "Normalize: expected a floating point tensor, got uint8");
  EXPECT_EQ(error_of([] { Normalize({0.5}, {1.0})(zeros({2, 2})); }),
            "Normalize: expected an image (C, H, W), got shape [2, 2]");
}

TEST(PadTest, MatchesTorchvisionPadLeftTopRightBottom) {
  // torchvision Pad([1, 2, 3, 0], fill=9) on the sample image: channel 0.
  const Tensor p = Pad({1, 2, 3, 0}, 9)(sample_image());
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{3, 4, 6}));
  const std::vector<uint8_t> v = to_vector<uint8_t>(p);
  EXPECT_EQ(std::vector<uint8_t>(v.begin(), v.begin() + 24),
            (std::vector<uint8_t>{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0, 1, 9, 9, 9, 9, 127, 128, 9, 9, 9}));
  EXPECT_EQ(v[2 * 24 + 2 * 6 + 1], 254);
  EXPECT_EQ(Pad({2})(ramp()).sizes(), (std::vector<int64_t>{1, 7, 8}));
  EXPECT_EQ(Pad({1, 0})(ramp()).sizes(), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(error_of([] { Pad({1, 2, 3}); }), "Pad: padding takes 1, 2 or 4 values, got 3");
}

TEST(RandomCropTest, EqualsPaddingThenCroppingAtTheDrawnOffsets) {
  const Tensor img = ramp();
  const RandomCrop crop(std::array<int64_t, 2>{2, 3}, 1);
  for (uint64_t index = 0; index < 40; ++index) {
    // The same draws RandomCrop makes: top in [0, 5 - 2], then left in [0, 6 - 3].
    SampleRng rng(7, index);
    const int64_t top = rng.randint(0, 3), left = rng.randint(0, 3);
    const Tensor padded = Pad({1})(img);
    const Tensor expected = padded.slice(1, top, top + 2).slice(2, left, left + 3).contiguous();
    ASSERT_EQ(to_vector<uint8_t>(crop(img, 7, index)), to_vector<uint8_t>(expected)) << index;
  }
}

TEST(RandomCropTest, CoversEveryOffsetAndKeepsFloatValues) {
  const Tensor img = ToTensor()(ramp());
  const RandomCrop crop(3, 0);  // 3x3 out of 3x4: left is 0 or 1
  std::set<float> firsts;
  for (uint64_t i = 0; i < 64; ++i) firsts.insert(to_vector<float>(crop(img, 1, i))[0]);
  EXPECT_EQ(firsts, (std::set<float>{0.0f, 1.0f / 255.0f}));
  EXPECT_EQ(error_of([] { RandomCrop(5)(ramp()); }),
            "RandomCrop: crop size (5, 5) is larger than the padded image (3, 4)");
}

TEST(RandomHorizontalFlipTest, FlipsRowsWithProbabilityP) {
  const Tensor img = ramp();
  const std::vector<uint8_t> mirrored = {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8};
  EXPECT_EQ(to_vector<uint8_t>(RandomHorizontalFlip(1.0)(img)), mirrored);
  EXPECT_EQ(to_vector<uint8_t>(RandomHorizontalFlip(0.0)(img)), to_vector<uint8_t>(img));
  int flipped = 0;
  const RandomHorizontalFlip flip(0.5);
  for (uint64_t i = 0; i < 2000; ++i) flipped += to_vector<uint8_t>(flip(img, 3, i)) == mirrored;
  EXPECT_GT(flipped, 900);
  EXPECT_LT(flipped, 1100);
  EXPECT_THAT(error_of([] { RandomHorizontalFlip(1.5); }), HasSubstr("p must be in [0, 1], got 1.5"));
}

TEST(ComposeTest, ChainsTransformsOnOneStreamReproducibly) {
  const Compose aug({std::make_shared<RandomCrop>(32, 4), std::make_shared<RandomHorizontalFlip>(),
                     std::make_shared<ToTensor>(),
                     std::make_shared<Normalize>(std::vector<double>{0.5, 0.5, 0.5}, std::vector<double>{0.25, 0.25, 0.25})});
  Tensor img = randint(0, 256, {3, 32, 32}, DType::UInt8);
  const Tensor a = aug(img, 11, 5), b = aug(img, 11, 5), c = aug(img, 11, 6), d = aug(img, 12, 5);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(a), to_vector<float>(b));
  EXPECT_NE(to_vector<float>(a), to_vector<float>(c));
  EXPECT_NE(to_vector<float>(a), to_vector<float>(d));
  EXPECT_EQ(aug.repr(),
            "Compose(\n    RandomCrop(size=(32, 32), padding=4)\n    RandomHorizontalFlip(p=0.5)\n    ToTensor()\n"
            "    Normalize(mean=[0.5, 0.5, 0.5], std=[0.25, 0.25, 0.25])\n)");
}

TEST(TransformTest, InputIsNeverModified) {
  const Tensor img = ramp();
  const std::vector<uint8_t> before = to_vector<uint8_t>(img);
  RandomHorizontalFlip(1.0)(img);
  RandomCrop(3, 2)(img, 0, 1);
  Pad({1})(img);
  EXPECT_EQ(to_vector<uint8_t>(img), before);
}

TEST(SampleRngTest, StreamsDependOnlyOnSeedAndIndex) {
  SampleRng a(5, 9), b(5, 9), c(5, 10), d(6, 9);
  std::vector<uint32_t> va, vb, vc, vd;
  for (int i = 0; i < 10; ++i) {
    va.push_back(a.next_u32());
    vb.push_back(b.next_u32());
    vc.push_back(c.next_u32());
    vd.push_back(d.next_u32());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  EXPECT_NE(va, vd);
  // Philox4x32-10 of counter (9, 0, 0, 0) with key (5, 0): the first block of the stream.
  const auto block = philox4x32({9, 0, 0, 0}, {5, 0});
  EXPECT_EQ(std::vector<uint32_t>(va.begin(), va.begin() + 4), std::vector<uint32_t>(block.begin(), block.end()));
}

TEST(SampleRngTest, RandintIsUniformAndInRange) {
  SampleRng rng(1, 2);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) {
    const int64_t v = rng.randint(-2, 3);
    ASSERT_TRUE(v >= -2 && v <= 3);
    ++counts[static_cast<size_t>(v + 2)];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_EQ(rng.randint(4, 4), 4);
  EXPECT_EQ(error_of([&] { rng.randint(3, 2); }), "SampleRng::randint: empty range [3, 2]");
}

}  // namespace
