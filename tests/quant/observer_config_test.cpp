// QConfig's observer fields (observer, percentile, scale_init, learn_zero_point): their words,
// validation with clear errors, the text and JSON forms (written only when not the default, so
// texts recorded before them stay canonical) and JSON errors naming the place.
#include "qflow/quant/qconfig_mapping.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::HasSubstr;
using quant_test::error_of;

TEST(ObserverConfigTest, WordsRoundTripAndUnknownOnesAreRefused) {
  for (ObserverKind k : {ObserverKind::MovingAverage, ObserverKind::MinMax, ObserverKind::Lsq, ObserverKind::Tqt,
                         ObserverKind::Histogram, ObserverKind::Percentile, ObserverKind::Mse})
    EXPECT_EQ(parse_observer(to_string(k)), k);
  EXPECT_EQ(parse_scale_init("range"), ScaleInit::Range);
  EXPECT_THAT(error_of([] { parse_observer("kl"); }),
              HasSubstr("QConfig: unknown observer 'kl' (expected moving_average, minmax, lsq, tqt, histogram, "
                        "percentile or mse)"));
  EXPECT_THAT(error_of([] { parse_scale_init("zero"); }), HasSubstr("unknown scale_init 'zero' (expected lsq or range)"));
  EXPECT_TRUE(learns_scale(ObserverKind::Tqt));
  EXPECT_FALSE(learns_scale(ObserverKind::Histogram));
}

TEST(ObserverConfigTest, InvalidCombinationsAreRefused) {
  EXPECT_THAT(error_of([] { QConfig{.scheme = Scheme::Affine, .observer = ObserverKind::Tqt}.validate(); }),
              HasSubstr("observer tqt supports only the symmetric scheme"));
  EXPECT_THAT(error_of([] { QConfig{.formula = Formula::Cambricon, .observer = ObserverKind::Lsq}.validate(); }),
              HasSubstr("for power-of-two scales use observer tqt"));
  EXPECT_THAT(error_of([] { QConfig{.observer = ObserverKind::Lsq, .learn_zero_point = true}.validate(); }),
              HasSubstr("learn_zero_point needs observer lsq and the affine scheme, got observer lsq and scheme symmetric"));
  EXPECT_THAT(error_of([] { QConfig{.percentile = 30.0}.validate(); }), HasSubstr("percentile must be in (50, 100], got 30"));
  QConfig{.scheme = Scheme::Affine, .observer = ObserverKind::Lsq, .learn_zero_point = true}.validate();
  QConfig{.formula = Formula::Cambricon, .observer = ObserverKind::Tqt}.validate();
}

TEST(ObserverConfigTest, TextAndJsonNameOnlyWhatIsNotTheDefault) {
  EXPECT_EQ(QConfig{}.to_string(), "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure)");
  EXPECT_EQ((QConfig{.bits = 4, .observer = ObserverKind::Tqt, .scale_init = ScaleInit::Range}.to_string()),
            "QConfig(bits=4, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure, observer=tqt, "
            "scale_init=range)");
  EXPECT_EQ((QConfig{.observer = ObserverKind::Percentile, .percentile = 99.9}.to_string()),
            "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true, momentum=0.95, ste=pure, "
            "observer=percentile, percentile=99.9)");
  // The default mapping's JSON is the one checkpoints recorded before these fields existed.
  EXPECT_EQ(QConfigMapping(QConfig{}).to_json(),
            R"({"global":{"bits":8,"bn_fold":"running","formula":"google","momentum":0.95,"per_layer":true,"scheme":"symmetric","ste":"pure"},"rules":[]})");
  QConfigMapping m(QConfig{.bits = 4, .scheme = Scheme::Affine, .observer = ObserverKind::Lsq, .learn_zero_point = true});
  m.set_path("conv1", QConfig{.observer = ObserverKind::Mse});
  EXPECT_THAT(m.to_json(), HasSubstr(R"("learn_zero_point":true,"momentum":0.95,"observer":"lsq")"));
  EXPECT_EQ(QConfigMapping::from_json(m.to_json()), m);
  const auto parsed = QConfigMapping::from_json(
      R"({"global": {"observer": "percentile", "percentile": 99.5}, "rules": [{"type": "Linear", "qconfig": {"observer": "lsq", "scale_init": "range"}}]})");
  EXPECT_EQ(parsed.global()->observer, ObserverKind::Percentile);
  EXPECT_EQ(parsed.global()->percentile, 99.5);
  EXPECT_EQ(parsed.resolve("fc", "Linear")->observer, ObserverKind::Lsq);
  EXPECT_EQ(parsed.resolve("fc", "Linear")->percentile, 99.5);  // a rule starts from the global
  EXPECT_EQ(parsed.resolve("fc", "Linear")->scale_init, ScaleInit::Range);
}

TEST(ObserverConfigTest, JsonErrorsNameThePlace) {
  const auto err = [](const std::string& text) { return error_of([&] { QConfigMapping::from_json(text, {}, "m.json"); }); };
  EXPECT_THAT(err(R"({"global": {"observer": "entropy"}})"), HasSubstr("m.json: global: QConfig: unknown observer 'entropy'"));
  EXPECT_THAT(err(R"({"global": {"observer": 3}})"), HasSubstr("m.json: global: \"observer\" must be a string, got 3"));
  EXPECT_THAT(err(R"({"global": {"percentile": "high"}})"), HasSubstr("\"percentile\" must be a number"));
  EXPECT_THAT(err(R"({"rules": [{"path": "fc", "qconfig": {"observer": "tqt", "scheme": "affine"}}]})"),
              HasSubstr("m.json: rules[0] (path 'fc'): QConfig: observer tqt supports only the symmetric scheme"));
  EXPECT_THAT(err(R"({"global": {"learn_zero_point": 1}})"), HasSubstr("\"learn_zero_point\" must be true or false"));
}
