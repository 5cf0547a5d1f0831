// QConvBN: with fake quantization off it equals Conv2d → BatchNorm2d (outputs, running
// statistics, gradients) in training and eval; with it on, the folded forward of Note
// [Folding BN during QAT] op by op; freeze_bn; the state_dict layout of the float pair.
#include "nn/golden_util.h"
#include "qflow/autograd/gradcheck.h"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using ::testing::HasSubstr;
using nn_golden::seq;
using quant_test::error_of;
using quant_test::values;

namespace {

// Elementwise rtol plus the same tolerance relative to the tensor's largest magnitude: float32
// gradients of BatchNorm cancel large terms, so the small entries of both implementations
// carry errors of ~1e-6 of the largest one (measured against float64: nn's Conv2d → BatchNorm2d
// and QConvBN are equally far from the exact values).
void expect_rel(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  quant_test::expect_close(got, want, rtol, rtol * want.abs().max().item<double>(), what);
}

void set_bn_affine(nn::BatchNorm2d& bn, double seed) {
  NoGradGuard no_grad;
  bn.weight.copy_(seq(bn.weight.sizes(), seed, 0.5, bn.weight.dtype()).add(Scalar(1.0)));
  bn.bias.copy_(seq(bn.bias.sizes(), seed + 1.0, 0.3, bn.bias.dtype()));
}

struct Case {
  nn::Conv2dOptions conv;
  nn::BatchNormOptions bn;
};

// Three training steps and one eval step of Conv2d → BatchNorm2d beside a QConvBN built from
// them with fake quantization off: outputs, every gradient and the running statistics.
void expect_equals_conv_bn(DType dtype, double rtol, const QConfig& qconfig) {
  const Case cases[] = {
      {{.in = 3, .out = 4, .kernel = 3, .padding = 1, .bias = false}, {.features = 4}},
      {{.in = 2, .out = 4, .kernel = 3, .stride = 2, .groups = 2}, {.features = 4, .eps = 1e-3, .momentum = std::nullopt}},
      {{.in = 3, .out = 2, .kernel = 1}, {.features = 2, .momentum = 0.3}},
  };
  for (const Case& c : cases) {
    nn::Conv2d conv(c.conv);
    nn::BatchNorm2d bn(c.bn);
    conv.to(dtype);
    bn.to(dtype);
    set_bn_affine(bn, 0.4);
    auto q = QConvBN::from_float(conv, bn, qconfig);
    q->enable_fake_quant(false);
    SCOPED_TRACE(q->repr());
    for (int step = 0; step < 4; ++step) {
      const bool training = step < 3;
      conv.train(training);
      bn.train(training);
      q->train(training);
      const std::string what = fmt::format("step {} ({})", step, training ? "train" : "eval");
      Tensor x1 = seq({3, c.conv.in, 6, 5}, 0.3 + step, 1.0 + step, dtype).requires_grad_();
      Tensor x2 = x1.detach().requires_grad_();
      const Tensor want = bn(conv(x1));
      const Tensor got = (*q)(x2);
      expect_rel(got, want, rtol, what + " output");
      const Tensor g = seq(want.sizes(), 2.0 + step, 1.0, dtype);
      want.backward(g);
      got.backward(g);
      expect_rel(x2.grad(), x1.grad(), rtol, what + " input grad");
      // The batch fold's weight gradient also flows through the batch variance of the statistics
      // conv, whose float32 weight gradient sums x · (y − mean) and cancels mean(x) · Σ(y − mean)
      // = 0 term by term. Measured against float64 on the 1×1 case (inputs with a large mean):
      // QConvBN is 1.9e-5 of the largest entry off, Conv2d → BatchNorm2d 2e-6; the float64 test
      // shows that the two are the same function.
      const double weight_rtol = qconfig.bn_fold == BnFold::Batch ? 5 * rtol : rtol;
      expect_rel(q->weight.grad(), conv.weight.grad(), weight_rtol, what + " weight grad");
      if (c.conv.bias && training) {
        // Exactly 0 behind a training BN (the bias cancels against the batch mean): both
        // implementations return rounding noise, far below the gradient's scale.
        const double scale = rtol * g.abs().sum().item<double>();
        EXPECT_LE(q->bias.grad().abs().max().item<double>(), scale) << what;
        EXPECT_LE(conv.bias.grad().abs().max().item<double>(), scale) << what;
      } else if (c.conv.bias) {
        expect_rel(q->bias.grad(), conv.bias.grad(), rtol, what + " bias grad");
      }
      expect_rel(q->bn->weight.grad(), bn.weight.grad(), rtol, what + " gamma grad");
      expect_rel(q->bn->bias.grad(), bn.bias.grad(), rtol, what + " beta grad");
      expect_rel(q->bn->running_mean, bn.running_mean, rtol, what + " running_mean");
      expect_rel(q->bn->running_var, bn.running_var, rtol, what + " running_var");
      EXPECT_EQ(q->bn->num_batches_tracked.item<int64_t>(), bn.num_batches_tracked.item<int64_t>());
      conv.zero_grad();
      bn.zero_grad();
      q->zero_grad();
    }
  }
}

TEST(QConvBNTest, BatchFoldWithoutFakeQuantEqualsConvThenBatchNormInTrainingAndEval) {
  expect_equals_conv_bn(DType::Float32, 1e-5, {.bn_fold = BnFold::Batch});
}

// In float64 the rounding noise vanishes: the folded formulation is the same function.
TEST(QConvBNTest, BatchFoldWithoutFakeQuantEqualsConvThenBatchNormInFloat64) {
  expect_equals_conv_bn(DType::Float64, 1e-10, {.bn_fold = BnFold::Batch});
}

// PyTorch's one-conv formulation: conv(x, W k) / k is conv(x, W) up to rounding, then the
// BatchNorm itself, so again the pair's outputs, gradients and running statistics.
TEST(QConvBNTest, RunningFoldWithoutFakeQuantEqualsConvThenBatchNorm) {
  expect_equals_conv_bn(DType::Float32, 1e-5, {.bn_fold = BnFold::Running});
  expect_equals_conv_bn(DType::Float64, 1e-10, {.bn_fold = BnFold::Running});
}

TEST(QConvBNTest, StateDictHasTheFloatPairLayout) {
  nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .bias = false});
  nn::BatchNorm2d bn({.features = 3});
  bn(conv(seq({2, 2, 4, 4}, 0.1)));  // move the running statistics
  auto q = QConvBN::from_float(conv, bn, {.per_layer = false});
  const nn::StateDict sd = q->state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{
                           "weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                           "input_observer.min_val", "input_observer.max_val", "input_observer.num_batches_tracked",
                           "input_observer.frozen", "weight_observer.min_val", "weight_observer.max_val",
                           "weight_observer.num_batches_tracked", "weight_observer.frozen"}));
  EXPECT_THAT(values(sd.at("weight")), ::testing::ElementsAreArray(values(conv.weight)));
  EXPECT_THAT(values(sd.at("bn.running_mean")), ::testing::ElementsAreArray(values(bn.running_mean)));
  EXPECT_EQ(sd.at("bn.num_batches_tracked").item<int64_t>(), 1);
  EXPECT_EQ(sd.at("weight_observer.min_val").numel(), 3);  // per channel
  // A float conv + bn state_dict loads into it key by key (observers left as they are).
  nn::StateDict float_sd;
  for (const auto& [k, v] : conv.state_dict()) float_sd.insert(k, v);
  for (const auto& [k, v] : bn.state_dict()) float_sd.insert("bn." + k, v);
  QConvBN fresh({.in = 2, .out = 3, .kernel = 3, .bias = false});
  const nn::LoadStateDictResult r = fresh.load_state_dict(float_sd, false);
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_EQ(r.missing_keys.size(), 8u);  // the observers' buffers
  EXPECT_THAT(values(fresh.bn->running_var), ::testing::ElementsAreArray(values(bn.running_var)));
}

// The quantized training forward, op by op, for a fresh module (observers seeded by this batch).
Tensor folded_reference(const QConvBN& q, const Tensor& x, const QConfig& qc) {
  const Range rx = tensor_range(x, false);
  const Tensor xq = fake_quantize(x, compute_qparams(rx.min, rx.max, qc), qc);
  const Tensor y = F::conv2d(xq, q.weight, q.bias, {1}, 1, {1}, 1);
  const Tensor rm = zeros({q.conv_options().out}), rv = ones({q.conv_options().out});
  auto [normalized, mean, invstd] = native_batch_norm(y, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  const Tensor k = q.bn->weight * invstd;
  const Tensor w = q.weight * k.view({q.conv_options().out, 1, 1, 1});
  const Tensor b = q.bn->bias + (q.bias - mean) * k;
  const Range rw = tensor_range(w, !qc.per_layer);
  return F::conv2d(xq, fake_quantize(w, compute_qparams(rw.min, rw.max, qc), qc), b, {1}, 1, {1}, 1);
}

TEST(QConvBNTest, QuantizedTrainingForwardFoldsBatchStatistics) {
  for (const QConfig qc : {QConfig{.bn_fold = BnFold::Batch},
                           QConfig{.bits = 4, .scheme = Scheme::Affine, .per_layer = false, .bn_fold = BnFold::Batch},
                           QConfig{.bits = 6, .formula = Formula::Cambricon, .per_layer = false, .bn_fold = BnFold::Batch}}) {
    SCOPED_TRACE(qc.to_string());
    QConvBN q({.in = 2, .out = 3, .kernel = 3, .padding = 1}, {}, qc);
    set_bn_affine(*q.bn, 0.9);
    const Tensor x = seq({2, 2, 5, 5}, 0.6, 1.5);
    const Tensor want = folded_reference(q, x, qc);
    quant_test::expect_close(q(x), want, 0.0);
    // Running statistics: those BatchNorm2d computes on the conv of the quantized input.
    nn::BatchNorm2d bn({.features = 3});
    const Range rx = tensor_range(x, false);
    bn(F::conv2d(fake_quantize(x, compute_qparams(rx.min, rx.max, qc), qc), q.weight, q.bias, {1}, 1, {1}, 1));
    quant_test::expect_close(q.bn->running_mean, bn.running_mean, 0.0);
    quant_test::expect_close(q.bn->running_var, bn.running_var, 0.0);
  }
}

// bn_fold = running, op by op: the weight folded with the running statistics is quantized, the
// conv output is unscaled, biased and batch-normalized by bn with the batch statistics.
TEST(QConvBNTest, RunningFoldTrainingForwardQuantizesTheRunningFold) {
  for (const QConfig qc : {QConfig{.bn_fold = BnFold::Running},
                           QConfig{.bits = 4, .scheme = Scheme::Affine, .per_layer = false, .bn_fold = BnFold::Running}}) {
    SCOPED_TRACE(qc.to_string());
    QConvBN q({.in = 2, .out = 3, .kernel = 3, .padding = 1, .bias = true}, {}, qc);
    set_bn_affine(*q.bn, 0.9);
    {
      NoGradGuard no_grad;
      q.bn->running_mean.copy_(seq({3}, 0.1, 0.2));
      q.bn->running_var.copy_(seq({3}, 0.3, 0.5).abs().add(Scalar(0.5)));
    }
    nn::BatchNorm2d bn({.features = 3});
    bn.load_state_dict(q.bn->state_dict());
    const Tensor x = seq({2, 2, 5, 5}, 0.6, 1.5);
    const Range rx = tensor_range(x, false);
    const Tensor xq = fake_quantize(x, compute_qparams(rx.min, rx.max, qc), qc);
    const Tensor k = q.bn->weight * q.bn->running_var.to(DType::Float64).add(Scalar(1e-5)).rsqrt().to(DType::Float32);
    const Tensor w = q.weight * k.view({3, 1, 1, 1});
    const Range rw = tensor_range(w, !qc.per_layer);
    const Tensor y = F::conv2d(xq, fake_quantize(w, compute_qparams(rw.min, rw.max, qc), qc), Tensor(), {1}, 1, {1}, 1);
    const Tensor want = bn(y / k.view({1, 3, 1, 1}) + q.bias.view({1, 3, 1, 1}));
    quant_test::expect_close(q(x), want, 0.0);
    quant_test::expect_close(q.bn->running_mean, bn.running_mean, 0.0);
    quant_test::expect_close(q.bn->running_var, bn.running_var, 0.0);
    EXPECT_EQ(q.bn->num_batches_tracked.item<int64_t>(), 1);
    // Eval folds the running statistics exactly as the batch fold does.
    QConvBN batch_fold({.in = 2, .out = 3, .kernel = 3, .padding = 1, .bias = true}, {},
                       QConfig{.bits = qc.bits, .scheme = qc.scheme, .per_layer = qc.per_layer, .bn_fold = BnFold::Batch});
    batch_fold.load_state_dict(q.state_dict());
    q.eval();
    batch_fold.eval();
    quant_test::expect_close(q(x), batch_fold(x), 0.0);
  }
}

TEST(QConvBNTest, FreezeBnKeepsRunningStatisticsAndFoldsThem) {
  QConvBN q({.in = 2, .out = 3, .kernel = 3, .padding = 1});
  set_bn_affine(*q.bn, 0.2);
  for (int step = 0; step < 2; ++step) q(seq({2, 2, 4, 4}, step, 2.0));
  q.freeze_bn();
  freeze_observers(q);
  const std::vector<float> rm = values(q.bn->running_mean), rv = values(q.bn->running_var);
  const Tensor x = seq({2, 2, 4, 4}, 5.0);
  const Tensor train_out = q(x);
  EXPECT_THAT(values(q.bn->running_mean), ::testing::ElementsAreArray(rm));
  EXPECT_THAT(values(q.bn->running_var), ::testing::ElementsAreArray(rv));
  EXPECT_EQ(q.bn->num_batches_tracked.item<int64_t>(), 2);
  q.eval();
  quant_test::expect_close(train_out, q(x), 0.0);
  EXPECT_THAT(q.extra_repr(), HasSubstr("bn_frozen=True"));
  q.freeze_bn(false);
  q.train();
  q(x);
  EXPECT_EQ(q.bn->num_batches_tracked.item<int64_t>(), 3);
}

TEST(QConvBNTest, BatchFoldFloatPathGradcheckInTrainingAndEval) {
  QConvBN q({.in = 2, .out = 2, .kernel = 3, .padding = 1, .bias = true}, {}, {.bn_fold = BnFold::Batch});
  set_bn_affine(*q.bn, 0.5);
  q.enable_fake_quant(false);
  q.to(DType::Float64);
  const Tensor x = seq({2, 2, 3, 3}, 0.4, 1.0, DType::Float64).requires_grad_();
  const TensorList inputs{x, q.weight, q.bias, q.bn->weight, q.bn->bias};
  auto fn = [&](const TensorList& in) { return q(in[0]); };
  EXPECT_TRUE(gradcheck(fn, inputs));
  q.eval();
  EXPECT_TRUE(gradcheck(fn, inputs));
}

TEST(QConvBNTest, RunningFoldFloatPathGradcheck) {
  QConvBN q({.in = 2, .out = 2, .kernel = 3, .padding = 1, .bias = true}, {}, {.bn_fold = BnFold::Running});
  set_bn_affine(*q.bn, 0.5);
  q.enable_fake_quant(false);
  q.to(DType::Float64);
  const Tensor x = seq({2, 2, 3, 3}, 0.4, 1.0, DType::Float64).requires_grad_();
  const TensorList inputs{x, q.weight, q.bias, q.bn->weight, q.bn->bias};
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return q(in[0]); }, inputs));
}

TEST(QConvBNTest, RejectsMismatchedOrUntrackedBatchNorm) {
  EXPECT_THAT(error_of([] { QConvBN({.in = 1, .out = 3}, {.features = 4}); }),
              HasSubstr("QConvBN: the BatchNorm has 4 features but the convolution has 3 output channels"));
  EXPECT_THAT(error_of([] { QConvBN({.in = 1, .out = 3}, {.track_running_stats = false}); }),
              HasSubstr("QConvBN: the BatchNorm must track running statistics"));
  nn::Conv2d conv({.in = 1, .out = 3});
  nn::BatchNorm2d bn({.features = 2});
  EXPECT_THAT(error_of([&] { QConvBN::from_float(conv, bn, {}); }),
              HasSubstr("QConvBN::from_float: the BatchNorm2d has 2 features but the Conv2d has 3 output channels"));
}

}  // namespace
