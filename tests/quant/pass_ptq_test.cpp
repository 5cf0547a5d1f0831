// Post-training quantization: prepare_ptq folds BN for good then quantizes, calibrate moves
// the observers (and only them), and the deploy model equals the calibrated model's eval.
#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using ::testing::HasSubstr;
using quant_test::error_of;

TEST(PtqPassTest, PrepareFoldsBatchNormThenQuantizesEveryConv) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("resnet18", example, 3);
  gm->train();
  PassSummary s;
  auto ptq = prepare_ptq(*gm, example, {}, &s);
  EXPECT_EQ(count_of(*ptq, "QConv2d"), 20);
  EXPECT_EQ(count_of(*ptq, "QLinear"), 1);
  EXPECT_EQ(count_of(*ptq, "QConvBN"), 0);
  EXPECT_EQ(count_of(*ptq, "BatchNorm2d"), 0);
  EXPECT_EQ(s.pass, "prepare_ptq");
  EXPECT_EQ(s.batchnorm_folded, 20);
  EXPECT_EQ(s.count("QConv2d"), 20);
  EXPECT_FALSE(ptq->is_training());
  EXPECT_TRUE(gm->is_training());  // the input keeps its mode and modules
  EXPECT_EQ(count_of(*gm, "BatchNorm2d"), 20);
  EXPECT_TRUE(ptq->get_submodule<QConv2d>("conv1")->bias.defined());  // the folded BN shift
  // With fake quantization off it is the float model in eval mode.
  enable_fake_quant(*ptq, false);
  gm->eval();
  const Tensor x = randn({2, 3, 32, 32});
  NoGradGuard no_grad;
  expect_close_to_scale((*ptq)(x), (*gm)(x), 1e-5);
}

TEST(PtqPassTest, CalibrateMovesTheObserversOnlyAndDeployEqualsItsEval) {
  const Tensor example = randn({2, 3, 32, 32});
  auto gm = traced("resnet18", example, 4);
  auto ptq = prepare_ptq(*gm, example, {.scheme = Scheme::Affine});
  const QConv2d& conv1 = *ptq->get_submodule<QConv2d>("conv1");
  EXPECT_EQ(conv1.input_observer->num_observations(), 0);
  EXPECT_THAT(error_of([&] { dequantization_aware_training(*gm, *ptq, example, {.scheme = Scheme::Affine}); }),
              HasSubstr("train or calibrate the quantization-aware model before deploying it"));
  const std::vector<float> weight_before = to_vector<float>(conv1.weight);

  manual_seed(5);
  const std::vector<Tensor> batches{randn({4, 3, 32, 32}), randn({4, 3, 32, 32}) * 2.0, randn({4, 3, 32, 32})};
  EXPECT_EQ(calibrate(*ptq, batches, 2), 2);  // at most 2 of the 3
  EXPECT_EQ(conv1.input_observer->num_observations(), 2);
  EXPECT_EQ(conv1.weight_observer->num_observations(), 2);
  // The first batch seeds the moving average, the second moves it with momentum 0.95.
  const float lo0 = amin(batches[0]).item<float>(), hi0 = amax(batches[0]).item<float>();
  const float lo1 = amin(batches[1]).item<float>(), hi1 = amax(batches[1]).item<float>();
  EXPECT_FLOAT_EQ(conv1.input_observer->min_val().item<float>(), 0.95f * lo0 + 0.05f * lo1);
  EXPECT_FLOAT_EQ(conv1.input_observer->max_val().item<float>(), 0.95f * hi0 + 0.05f * hi1);
  EXPECT_EQ(to_vector<float>(conv1.weight), weight_before);  // nothing trained
  EXPECT_FALSE(ptq->is_training());                           // modes restored, observers included
  EXPECT_FALSE(conv1.input_observer->module().is_training());

  PassSummary s;
  auto deploy = dequantization_aware_training(*gm, *ptq, example, {.scheme = Scheme::Affine}, &s);
  EXPECT_EQ(s.count("DConv2d"), 20);
  EXPECT_EQ(s.batchnorm_folded, 0);  // already folded by prepare_ptq
  const Tensor x = randn({2, 3, 32, 32});
  NoGradGuard no_grad;
  expect_close_to_scale((*deploy)(x), (*ptq)(x), 1e-5);
  // Quantization changed the outputs, but not by much.
  gm->eval();
  const Tensor diff = ((*deploy)(x) - (*gm)(x)).abs().max();
  EXPECT_GT(diff.item<float>(), 0.0f);
  EXPECT_LT(diff.item<float>(), 0.2f * (*gm)(x).abs().max().item<float>());
}

TEST(PtqPassTest, CalibrateRespectsFrozenObserversAndTakesLoaderBatches) {
  const Tensor example = randn({1, 1, 28, 28});
  auto gm = traced("lenet5", example, 0, {.in_channels = 1, .image_size = 28});
  auto ptq = prepare_ptq(*gm, example, {});
  EXPECT_EQ(freeze_observers(*ptq), 10);  // 5 Q modules x (input, weight)
  struct Batch {
    Tensor images;
  };
  const std::vector<Batch> loader{{randn({2, 1, 28, 28})}, {randn({2, 1, 28, 28})}};
  EXPECT_EQ(calibrate(*ptq, loader), 2);
  EXPECT_EQ(ptq->get_submodule<QConv2d>("conv1")->input_observer->num_observations(), 0);
  freeze_observers(*ptq, false);
  EXPECT_EQ(calibrate(*ptq, loader), 2);
  EXPECT_EQ(ptq->get_submodule<QConv2d>("conv1")->input_observer->num_observations(), 2);
  EXPECT_EQ(ptq->get_submodule<QLinear>("fc3")->weight_observer->num_observations(), 2);
}

// PTQ calibrated by each histogram observer (Note [Histogram observers]): activations get a
// HistogramObserver, weights a MinMaxObserver; the deploy model computes what the calibrated
// model computes, and a percentile range is no wider than the min/max one.
TEST(PtqPassTest, HistogramObserversCalibrateAndDeploy) {
  const Tensor example = randn({1, 1, 28, 28});
  auto gm = traced("lenet5", example, 0, {.in_channels = 1, .image_size = 28});
  manual_seed(21);
  const std::vector<Tensor> batches{randn({8, 1, 28, 28}), randn({8, 1, 28, 28}) * Scalar(1.5)};
  auto minmax = prepare_ptq(*gm, example, QConfig{.observer = ObserverKind::MinMax});
  calibrate(*minmax, batches);
  for (ObserverKind k : {ObserverKind::Histogram, ObserverKind::Percentile, ObserverKind::Mse}) {
    const QConfig qc{.observer = k, .percentile = 99.0};
    auto ptq = prepare_ptq(*gm, example, qc);
    const QConv2d& conv2 = *ptq->get_submodule<QConv2d>("conv2");
    EXPECT_EQ(conv2.input_observer->module().type_name(), "HistogramObserver");
    EXPECT_EQ(conv2.weight_observer->module().type_name(), "MinMaxObserver");
    EXPECT_EQ(calibrate(*ptq, batches), 2);
    EXPECT_EQ(conv2.input_observer->num_observations(), 2);
    const float chosen = conv2.input_observer->max_val().item<float>();
    EXPECT_GT(chosen, 0.0f) << to_string(k);
    EXPECT_LE(chosen, minmax->get_submodule<QConv2d>("conv2")->input_observer->max_val().item<float>() * 1.0001f)
        << to_string(k);
    auto deploy = dequantization_aware_training(*gm, *ptq, example, qc);
    set_integer(*deploy, false);
    ptq->eval();
    deploy->eval();
    const Tensor x = randn({2, 1, 28, 28});
    NoGradGuard no_grad;
    expect_close_to_scale((*deploy)(x), (*ptq)(x), 1e-5);
  }
}
