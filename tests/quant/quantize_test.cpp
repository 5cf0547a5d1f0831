// quantize: the integers of fake_quantize (Note [Quantization numerics]) stored as uint8, int8
// or int32: hand-computed ties and clamps, (q - zero_point) * scale equal to fake_quantize bit
// for bit per tensor and per channel, and argument errors.
#include <cmath>
#include <limits>

#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using quant_test::error_of;
using quant_test::vec;

TEST(QuantizeTest, RoundsHalfToEvenClampsAndStoresTheIntegerType) {
  // scale 1, zero point 0, grid [-4, 3] (3-bit symmetric) as int8.
  const Tensor q = quantize(vec({-5.0f, -3.5f, -2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.4f, 3.6f}), vec({1.0f}),
                            vec({0.0f}), -4, 3, 0, DType::Int8);
  EXPECT_EQ(q.dtype(), DType::Int8);
  EXPECT_THAT(to_vector<int8_t>(q), ElementsAre(-4, -4, -2, -2, 0, 0, 2, 2, 3, 3));
  // Affine uint8: scale 0.5, zero point 10: x / 0.5 + 10.
  const Tensor u = quantize(vec({-6.0f, -4.75f, 0.0f, 0.25f, 0.75f, 200.0f}), vec({0.5f}), vec({10.0f}), 0, 255);
  EXPECT_EQ(u.dtype(), DType::UInt8);
  EXPECT_THAT(to_vector<uint8_t>(u), ElementsAre(0, 0, 10, 10, 12, 255));  // 10.5 → 10, 11.5 → 12 (to even)
}

// A NaN has no integer: it takes the grid's low end, as -inf does (casting it was undefined
// behaviour, found by UBSan); +inf takes the high end. fake_quantize keeps the NaN.
TEST(QuantizeTest, NonFiniteValuesClampToTheGridsEnds) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(to_vector<int8_t>(quantize(vec({nan, -inf, inf, 1.0f}), vec({1.0f}), vec({0.0f}), -128, 127, 0, DType::Int8)),
              ElementsAre(-128, -128, 127, 1));
  EXPECT_THAT(to_vector<uint8_t>(quantize(vec({nan, -inf, inf}), vec({0.5f}), vec({10.0f}), 0, 255)), ElementsAre(0, 0, 255));
  EXPECT_TRUE(std::isnan(to_vector<float>(fake_quantize(vec({nan}), vec({1.0f}), vec({0.0f}), -128, 127))[0]));
}

TEST(QuantizeTest, DequantizedIntegersEqualFakeQuantizeBitForBit) {
  manual_seed(3);
  const Tensor x = randn({4, 6, 5, 5}) * 3;
  // Per tensor, affine uint8.
  const Tensor s = vec({0.037f}), z = vec({131.0f});
  const Tensor q = quantize(x, s, z, 0, 255, 0, DType::UInt8);
  EXPECT_EQ(to_vector<float>((q.to(DType::Float32) - 131.0) * 0.037f), to_vector<float>(fake_quantize(x, s, z, 0, 255)));
  // Per channel along axis 1, symmetric int8.
  const Tensor sc = rand({6}) * 0.05 + 0.01, zc = zeros({6});
  const Tensor qc = quantize(x, sc, zc, -128, 127, 1, DType::Int8);
  EXPECT_EQ(to_vector<float>(qc.to(DType::Float32) * sc.view({1, 6, 1, 1})),
            to_vector<float>(fake_quantize(x, sc, zc, -128, 127, 1)));
}

TEST(QuantizeTest, BadArgumentsNameTheOp) {
  EXPECT_THAT(error_of([] { quantize(vec({1.0f}), vec({0.0f}), vec({0.0f}), 0, 255); }),
              HasSubstr("quantize: scale 0 (channel 0) has no integer grid"));
  EXPECT_THAT(error_of([] { quantize(vec({1.0f}), vec({1.0f}), vec({0.0f}), -128, 127, 0, DType::UInt8); }),
              HasSubstr("quantize: the grid [-128, 127] does not fit uint8"));
  EXPECT_THAT(error_of([] { quantize(vec({1.0f}), vec({1.0f}), vec({0.0f}), 0, 255, 0, DType::Float32); }),
              HasSubstr("quantize: dtype must be uint8, int8 or int32"));
}
