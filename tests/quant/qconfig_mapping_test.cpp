// QConfigMapping (Note [QConfig mapping]): which rule decides, the JSON form and its refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/quant/qconfig_mapping.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::HasSubstr;
using ::testing::Not;
using quant_test::error_of;

namespace {

const QConfig k8{};
const QConfig k4{.bits = 4};
const QConfig k6{.bits = 6};
const QConfig k5{.bits = 5};

}  // namespace

TEST(QConfigMappingTest, GlobalAppliesWithoutRules) {
  const QConfigMapping m(k4);
  EXPECT_EQ(m.resolve("conv1", "Conv2d"), k4);
  EXPECT_EQ(m.deciding_rule("conv1", "Conv2d"), "global");
  EXPECT_EQ(QConfigMapping(std::nullopt).resolve("fc", "Linear"), std::nullopt);
}

TEST(QConfigMappingTest, TypeRuleOverridesTheGlobal) {
  QConfigMapping m(k4);
  m.set_type("Linear", k8);
  EXPECT_EQ(m.resolve("fc", "Linear"), k8);
  EXPECT_EQ(m.resolve("conv1", "Conv2d"), k4);
  EXPECT_EQ(m.deciding_rule("fc", "Linear"), "type 'Linear'");
}

TEST(QConfigMappingTest, PathCoversTheLayerAndWhatLiesBelowItTheLongestWinning) {
  QConfigMapping m(k4);
  m.set_path("layer1", k8).set_path("layer1.0.conv2", std::nullopt);
  EXPECT_EQ(m.resolve("layer1", "Conv2d"), k8);
  EXPECT_EQ(m.resolve("layer1.0.conv1", "Conv2d"), k8);
  EXPECT_EQ(m.resolve("layer1.0.conv2", "Conv2d"), std::nullopt);  // longer path wins, whatever the order
  EXPECT_EQ(m.resolve("layer10.conv", "Conv2d"), k4);               // a prefix of the name is not a parent
}

TEST(QConfigMappingTest, RegexMustMatchTheWholePathAndTheFirstListedWins) {
  QConfigMapping m(k4);
  m.set_path_regex("layer.\\.0\\..*", k6).set_path_regex("layer1\\..*", k5);
  EXPECT_EQ(m.resolve("layer1.0.conv1", "Conv2d"), k6);  // both match: the first listed
  EXPECT_EQ(m.resolve("layer1.1.conv1", "Conv2d"), k5);
  EXPECT_EQ(m.resolve("layer1", "Conv2d"), k4);          // "layer1\\..*" needs the dot
  EXPECT_EQ(m.resolve("xlayer1.1", "Conv2d"), k4);       // matched whole, not searched
}

TEST(QConfigMappingTest, PathBeatsRegexBeatsTypeBeatsGlobal) {
  QConfigMapping m(k4);
  m.set_type("Conv2d", k5).set_path_regex("layer1\\..*", k6).set_path("layer1.0.conv1", std::nullopt);
  EXPECT_EQ(m.resolve("layer1.0.conv1", "Conv2d"), std::nullopt);
  EXPECT_EQ(m.deciding_rule("layer1.0.conv1", "Conv2d"), "path 'layer1.0.conv1'");
  EXPECT_EQ(m.resolve("layer1.0.conv2", "Conv2d"), k6);
  EXPECT_EQ(m.resolve("conv1", "Conv2d"), k5);
  EXPECT_EQ(m.resolve("linear", "Linear"), k4);
}

TEST(QConfigMappingTest, InvalidRulesAreRefusedNamingThem) {
  EXPECT_THAT(error_of([] { QConfigMapping(k8).set_type("BatchNorm2d", k8).validate(); }),
              HasSubstr("rule type 'BatchNorm2d': unknown type; the passes quantize Conv2d and Linear"));
  EXPECT_THAT(error_of([] { QConfigMapping(k8).set_path_regex("layer(1", k8).validate(); }),
              HasSubstr("rule path_regex 'layer(1': not a valid regular expression"));
  EXPECT_THAT(error_of([] { QConfigMapping(k8).set_path("fc", QConfig{.bits = 17}).validate(); }),
              HasSubstr("rule path 'fc': QConfig: bits must be in 2..16, got 17"));
  EXPECT_THAT(error_of([] { QConfigMapping(k8).set_path("fc", k4).set_path("fc", k8).validate(); }),
              HasSubstr("two rules for path 'fc'"));
  EXPECT_THAT(error_of([] { QConfigMapping(QConfig{.bits = 1}).validate(); }), HasSubstr("the global QConfig: bits"));
}

TEST(QConfigMappingTest, PathsAndRegexesThatSelectNoLayerAreRefusedListingValidOnes) {
  const std::map<std::string, std::string> layers{{"conv1", "Conv2d"}, {"conv2", "Conv2d"}, {"fc", "Linear"}};
  QConfigMapping ok(k4);
  ok.set_path("conv1", k8).set_path_regex("conv.", k8).set_type("Linear", k8);
  EXPECT_NO_THROW(ok.check_layers(layers, "test"));
  EXPECT_THAT(error_of([&] { QConfigMapping(k4).set_path("fc1", k8).check_layers(layers, "qat"); }),
              HasSubstr("qat: the QConfig mapping's rule path 'fc1' selects no layer the pass quantizes; the 3 such "
                        "layers include conv1 (Conv2d), conv2 (Conv2d), fc (Linear)"));
  EXPECT_THAT(error_of([&] { QConfigMapping(k4).set_path_regex("layer1\\..*", k8).check_layers(layers, "qat"); }),
              HasSubstr("rule path_regex 'layer1\\..*' selects no layer"));
}

TEST(QConfigMappingTest, JsonRulesStartFromTheGlobalAndTheGlobalFromTheDefaults) {
  const QConfig defaults{.scheme = Scheme::Affine, .per_layer = false};
  const auto m = QConfigMapping::from_json(R"({"global": {"bits": 4},
      "rules": [{"path": "conv1", "qconfig": {"bits": 8}},
                {"path_regex": "layer4\\..*", "qconfig": "none"},
                {"type": "Linear", "qconfig": {"ste": "clipped", "momentum": 0.5}}]})",
                                           defaults);
  const QConfig g{.bits = 4, .scheme = Scheme::Affine, .per_layer = false};
  EXPECT_EQ(m.global(), g);
  ASSERT_EQ(m.rules().size(), 3u);
  EXPECT_EQ(m.rules()[0], (QConfigRule{RuleKind::Path, "conv1", QConfig{.bits = 8, .scheme = Scheme::Affine, .per_layer = false}}));
  EXPECT_EQ(m.rules()[1], (QConfigRule{RuleKind::PathRegex, "layer4\\..*", std::nullopt}));
  EXPECT_EQ(m.rules()[2].qconfig,
            (QConfig{.bits = 4, .scheme = Scheme::Affine, .per_layer = false, .momentum = 0.5, .ste = Ste::Clipped}));
  // The canonical text round-trips, and spells every field out.
  EXPECT_EQ(QConfigMapping::from_json(m.to_json()), m);
  EXPECT_THAT(m.to_json(), HasSubstr(R"({"path":"conv1","qconfig":{"bits":8,"bn_fold":"running","formula":"google",)"
                                     R"("momentum":0.95,"per_layer":false,"scheme":"affine","ste":"pure"}})"));
  // No "global": the defaults; "none": every layer float unless a rule says otherwise.
  EXPECT_EQ(QConfigMapping::from_json("{}", defaults), QConfigMapping(defaults));
  const auto floats = QConfigMapping::from_json(R"({"global": "none", "rules": [{"type": "Conv2d", "qconfig": {}}]})");
  EXPECT_EQ(floats.resolve("fc", "Linear"), std::nullopt);
  EXPECT_EQ(floats.resolve("conv1", "Conv2d"), QConfig{});
}

TEST(QConfigMappingTest, JsonActivationBitsAreWrittenOnlyWhenSet) {
  const auto m = QConfigMapping::from_json(R"({"global": {"bits": 4, "activation_bits": 8},
      "rules": [{"path": "conv1", "qconfig": {"bits": 8, "activation_bits": null}}]})");
  EXPECT_EQ(m.global(), (QConfig{.bits = 4, .activation_bits = 8}));
  EXPECT_EQ(m.rules()[0].qconfig, QConfig{});  // null: the activations follow bits again
  EXPECT_EQ(QConfigMapping::from_json(m.to_json()), m);
  EXPECT_THAT(m.to_json(), HasSubstr(R"("global":{"activation_bits":8,"bits":4,)"));
  EXPECT_THAT(m.to_json(), HasSubstr(R"({"path":"conv1","qconfig":{"activation_bits":null,"bits":8,)"));
  EXPECT_THAT(QConfigMapping(QConfig{}).to_json(), Not(HasSubstr("activation_bits")));
  EXPECT_THAT(error_of([] { QConfigMapping::from_json(R"({"global": {"activation_bits": 40}})", {}, "m.json"); }),
              HasSubstr("m.json: global: QConfig: activation_bits must be in 2..16, got 40"));
  EXPECT_THAT(error_of([] { QConfigMapping::from_json(R"({"global": {"activation_bits": "8"}})", {}, "m.json"); }),
              HasSubstr("m.json: global: \"activation_bits\" must be an integer, got \"8\""));
}

TEST(QConfigMappingTest, JsonErrorsNameTheSourceThePlaceAndTheValue) {
  const auto err = [](const std::string& text) { return error_of([&] { QConfigMapping::from_json(text, {}, "m.json"); }); };
  EXPECT_THAT(err("{"), HasSubstr("m.json: not valid JSON"));
  EXPECT_THAT(err(R"({"global": {}, "layers": []})"), HasSubstr("m.json: top level: unknown key \"layers\""));
  EXPECT_THAT(err(R"({"global": {"bit": 4}})"), HasSubstr("m.json: global: unknown QConfig field \"bit\""));
  EXPECT_THAT(err(R"({"global": {"bits": "8"}})"), HasSubstr("m.json: global: \"bits\" must be an integer, got \"8\""));
  EXPECT_THAT(err(R"({"rules": [{"path": "fc", "qconfig": {"bits": 20}}]})"),
              HasSubstr("m.json: rules[0] (path 'fc'): QConfig: bits must be in 2..16, got 20"));
  EXPECT_THAT(err(R"({"rules": [{"path": "fc", "qconfig": {"scheme": "asym"}}]})"),
              HasSubstr("m.json: rules[0] (path 'fc'): QConfig: unknown scheme 'asym' (expected symmetric or affine)"));
  EXPECT_THAT(err(R"({"rules": [{"path": "fc"}]})"), HasSubstr("m.json: rules[0]: a rule needs \"qconfig\""));
  EXPECT_THAT(err(R"({"rules": [{"path": "fc", "type": "Linear", "qconfig": "none"}]})"),
              HasSubstr("has both path and type"));
  EXPECT_THAT(err(R"({"rules": [{"module": "fc", "qconfig": "none"}]})"), HasSubstr("rules[0]: unknown key \"module\""));
  EXPECT_THAT(err(R"({"rules": [{"type": "Conv1d", "qconfig": "none"}]})"),
              HasSubstr("m.json: rules: QConfigMapping: rule type 'Conv1d': unknown type"));
  EXPECT_THAT(err(R"({"rules": [{"path_regex": "(", "qconfig": "none"}]})"),
              HasSubstr("rule path_regex '(': not a valid regular expression"));
  EXPECT_THAT(error_of([] { QConfigMapping::from_file("/nonexistent/m.json"); }),
              HasSubstr("cannot read '/nonexistent/m.json'"));
}
