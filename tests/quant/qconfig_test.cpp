// QConfig: defaults, validation messages, integer grids, text forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/core/error.h"
#include "qflow/quant/qconfig.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::HasSubstr;

namespace {

std::string validation_error(const QConfig& qc) {
  try {
    qc.validate();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

std::string validation_error_of_parse(const std::string& text) {
  try {
    parse_bn_fold(text);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(QConfigTest, DefaultsAreEightBitSymmetricGooglePerLayer) {
  const QConfig qc;
  EXPECT_EQ(qc.bits, 8);
  EXPECT_EQ(qc.scheme, Scheme::Symmetric);
  EXPECT_EQ(qc.formula, Formula::Google);
  EXPECT_TRUE(qc.per_layer);
  EXPECT_DOUBLE_EQ(qc.momentum, 0.95);
  EXPECT_EQ(qc.ste, Ste::Pure);
  EXPECT_EQ(qc.bn_fold, BnFold::Running);
  EXPECT_NO_THROW(qc.validate());
  EXPECT_EQ(qc.to_string(), "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure)");
}

TEST(QConfigTest, GridsOfEachScheme) {
  QConfig sym{.bits = 8};
  EXPECT_EQ(sym.quant_min(), -128);
  EXPECT_EQ(sym.quant_max(), 127);
  QConfig aff{.bits = 8, .scheme = Scheme::Affine};
  EXPECT_EQ(aff.quant_min(), 0);
  EXPECT_EQ(aff.quant_max(), 255);
  QConfig two{.bits = 2};
  EXPECT_EQ(two.quant_min(), -2);
  EXPECT_EQ(two.quant_max(), 1);
  QConfig sixteen{.bits = 16, .scheme = Scheme::Affine};
  EXPECT_EQ(sixteen.quant_min(), 0);
  EXPECT_EQ(sixteen.quant_max(), 65535);
}

TEST(QConfigTest, RejectsInvalidCombinations) {
  EXPECT_THAT(validation_error({.bits = 1}), HasSubstr("bits must be in 2..16, got 1"));
  EXPECT_THAT(validation_error({.bits = 17}), HasSubstr("bits must be in 2..16, got 17"));
  EXPECT_THAT(validation_error({.scheme = Scheme::Affine, .formula = Formula::Cambricon}),
              HasSubstr("formula cambricon supports only the symmetric scheme"));
  EXPECT_THAT(validation_error({.momentum = 1.0}), HasSubstr("momentum must be in [0, 1), got 1"));
  EXPECT_THAT(validation_error({.momentum = -0.5}), HasSubstr("momentum must be in [0, 1), got -0.5"));
  EXPECT_NO_THROW((QConfig{.bits = 2, .formula = Formula::Cambricon, .momentum = 0.0}.validate()));
  EXPECT_NO_THROW((QConfig{.bits = 16, .scheme = Scheme::Affine}.validate()));
}

TEST(QConfigTest, TextFormsRoundTrip) {
  EXPECT_EQ(parse_scheme("affine"), Scheme::Affine);
  EXPECT_EQ(parse_formula("cambricon"), Formula::Cambricon);
  EXPECT_EQ(parse_ste("clipped"), Ste::Clipped);
  EXPECT_EQ(to_string(parse_scheme("symmetric")), "symmetric");
  EXPECT_THROW(
      {
        try {
          parse_formula("tensorrt");
        } catch (const Error& e) {
          EXPECT_THAT(e.message(), HasSubstr("unknown formula 'tensorrt' (expected google or cambricon)"));
          throw;
        }
      },
      Error);
  const QConfig qc{.bits = 4, .scheme = Scheme::Affine, .per_layer = false, .momentum = 0.9, .ste = Ste::Clipped};
  EXPECT_EQ(qc.to_string(), "QConfig(bits=4, scheme=affine, formula=google, per_layer=false, momentum=0.9, ste=clipped)");
  // bn_fold shows only when it is not the default.
  EXPECT_EQ(parse_bn_fold("running"), BnFold::Running);
  EXPECT_EQ(to_string(parse_bn_fold("batch")), "batch");
  EXPECT_THAT(validation_error_of_parse("folded"), HasSubstr("unknown bn_fold 'folded' (expected batch or running)"));
  EXPECT_EQ(QConfig{.bn_fold = BnFold::Batch}.to_string(),
            "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure, bn_fold=batch)");
}

// Note [Weight and activation bits]: W4A8 quantizes weights on the 4-bit grid and activations
// on the 8-bit one; unset, the activations follow bits; the text shows the field only when set.
TEST(QConfigTest, ActivationBitsGiveTheActivationsTheirOwnGrid) {
  const QConfig w4a8{.bits = 4, .activation_bits = 8};
  EXPECT_EQ(w4a8.quant_min(), -8);
  EXPECT_EQ(w4a8.quant_max(), 7);
  const QConfig a = w4a8.activations();
  EXPECT_EQ(a.bits, 8);
  EXPECT_EQ(a.activation_bits, std::nullopt);
  EXPECT_EQ(a.quant_min(), -128);
  EXPECT_EQ(a.quant_max(), 127);
  EXPECT_EQ(QConfig{.bits = 4}.activations(), QConfig{.bits = 4});
  const QConfig affine{.bits = 4, .scheme = Scheme::Affine, .activation_bits = 6};
  EXPECT_EQ(affine.activations().quant_max(), 63);
  EXPECT_EQ(w4a8.to_string(),
            "QConfig(bits=4, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure, activation_bits=8)");
  EXPECT_EQ(QConfig{.bits = 4}.to_string(),
            "QConfig(bits=4, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure)");
  EXPECT_THAT(validation_error({.activation_bits = 1}), HasSubstr("activation_bits must be in 2..16, got 1"));
  EXPECT_THAT(validation_error({.activation_bits = 17}), HasSubstr("activation_bits must be in 2..16, got 17"));
}

}  // namespace
