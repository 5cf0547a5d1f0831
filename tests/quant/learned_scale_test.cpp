// LSQ and TQT (Note [Learned scales]): the scale gradients against PyTorch's learnable fake
// quantization, against the papers' formulas on hand-computed cases and against central finite
// differences of a smooth loss of the straight-through surrogate; forward values bit for bit
// those of the fake_quantize kernel; initialisation; state_dict round trip and a resumed step;
// the parameters the optimizer trains.
#include <cmath>
#include <numbers>

#include "qflow/quant/learned_quantizer.h"
#include "qflow/quant/qconv.h"
#include "quant/learned_scales_golden.inc"
#include "quant/quant_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using quant_test::values;
using quant_test::vec;
using quant_test::error_of;

namespace {

// Sets a tensor's values without autograd.
void set(Tensor t, const std::vector<float>& v) {
  NoGradGuard no_grad;
  t.copy_(from_vector<float>(v, t.sizes()));
}

// A quantizer that has seen `x` once in training mode (so it is initialised).
template <class Q>
std::shared_ptr<Q> initialised(const QConfig& qc, int64_t channels, const Tensor& x) {
  auto q = std::make_shared<Q>(ObserverOptions{.qconfig = qc, .channels = channels});
  q->train();
  (*q)(x);
  return q;
}

// d sum(w · fake_quantize(x)) / d(parameter), x shaped `shape`.
struct Grads {
  Tensor out, x, param;
};
template <class Q>
Grads grads_of(Q& q, const Tensor& param, const std::vector<float>& x, const std::vector<float>& w, IntList shape) {
  Tensor xt = from_vector<float>(x, shape).requires_grad_(true);
  Tensor out = q.fake_quantize(xt);
  (out * from_vector<float>(w, shape)).sum().backward();
  return {out.detach(), xt.grad(), param.grad()};
}

const std::vector<float> kX = {-1.3f, 0.26f, 0.8f, 5.0f};
const std::vector<float> kW = {1.0f, 2.0f, 3.0f, 4.0f};

}  // namespace

// PyTorch's torch._fake_quantize_learnable_per_tensor_affine is LSQ with a learned zero point:
// same output, same gradients for x, scale and zero_point (tests/golden/quant_learned_scales.py).
TEST(LsqQuantizerTest, MatchesPyTorchLearnableFakeQuantize) {
  const QConfig qc{.bits = 3, .scheme = Scheme::Affine, .observer = ObserverKind::Lsq, .learn_zero_point = true};
  auto q = initialised<LsqQuantizer>(qc, 0, vec(golden::kLsqX));
  set(q->scale, {0.3f});
  set(q->zero_point, {2.0f});
  const Grads g = grads_of(*q, q->scale, golden::kLsqX, golden::kLsqW, {9});
  quant_test::expect_close(g.out, vec(golden::kLsqOut), 1e-6, 0.0, "out");
  quant_test::expect_close(g.x, vec(golden::kLsqGradX), 0.0, 0.0, "grad x");
  EXPECT_NEAR(g.param.item<double>(), golden::kLsqGradScale, 1e-6);
  EXPECT_NEAR(q->zero_point.grad().item<double>(), golden::kLsqGradZeroPoint, 1e-7);
}

// Esser et al. eq. 3 by hand: 3 bits symmetric (grid [-4, 3]), s = 0.5, x/s = -2.6, 0.52,
// 1.6, 10: round(x/s) - x/s = -0.4, 0.48, 0.4 inside, Qp = 3 where clamped; weighted by w and
// scaled by g = 1/√(N·Qp) = 1/√12.
TEST(LsqQuantizerTest, ScaleGradientFollowsThePaperPerTensor) {
  const QConfig qc{.bits = 3, .observer = ObserverKind::Lsq};
  auto q = initialised<LsqQuantizer>(qc, 0, vec(kX));
  set(q->scale, {0.5f});
  const Grads g = grads_of(*q, q->scale, kX, kW, {4});
  EXPECT_NEAR(g.param.item<double>(), (1 * -0.4 + 2 * 0.48 + 3 * 0.4 + 4 * 3.0) / std::sqrt(12.0), 2e-6);
  EXPECT_EQ(values(g.x), (std::vector<float>{1, 2, 3, 0}));  // clipped estimator for x
  EXPECT_EQ(values(g.out), (std::vector<float>{-1.5f, 0.5f, 1.0f, 1.5f}));
}

// Per output channel: one scale per row, g = 1/√(2·3) (two elements per scale). Row 1: x/s =
// 3.2 and 20, both clamped to Qp = 3.
TEST(LsqQuantizerTest, ScaleGradientFollowsThePaperPerChannel) {
  const QConfig qc{.bits = 3, .per_layer = false, .observer = ObserverKind::Lsq};
  auto q = initialised<LsqQuantizer>(qc, 2, from_vector<float>(kX, {2, 2}));
  set(q->scale, {0.5f, 0.25f});
  const Grads g = grads_of(*q, q->scale, kX, kW, {2, 2});
  const std::vector<float> gs = values(g.param);
  EXPECT_NEAR(gs[0], (1 * -0.4 + 2 * 0.48) / std::sqrt(6.0), 2e-6);
  EXPECT_NEAR(gs[1], (3 * 3.0 + 4 * 3.0) / std::sqrt(6.0), 2e-6);
  EXPECT_EQ(values(q->calculate_qparams().scale), (std::vector<float>{0.5f, 0.25f}));
}

// Jain et al.: log2 t = log2 1.7 is rounded up to 1, s = 2^1 / 2^(3-1) = 0.5 — the scale the
// cambricon formula gives the range max|x| = 1.7; ∂out/∂log2 t = s·ln 2·(round(x/s) - x/s)
// inside, s·ln 2·Qp where clamped, scaled by g = 1/√12.
TEST(TqtQuantizerTest, ThresholdGradientFollowsThePaper) {
  const QConfig qc{.bits = 3, .observer = ObserverKind::Tqt};
  auto q = initialised<TqtQuantizer>(qc, 0, vec(kX));
  set(q->log2_threshold, {std::log2(1.7f)});
  EXPECT_EQ(q->calculate_qparams().scale.item<float>(), 0.5f);
  EXPECT_EQ(compute_qparams(vec({-1.7f}), vec({1.7f}), {.bits = 3, .formula = Formula::Cambricon}).scale.item<float>(), 0.5f);
  const Grads g = grads_of(*q, q->log2_threshold, kX, kW, {4});
  EXPECT_NEAR(g.param.item<double>(), 0.5 * std::numbers::ln2 * (1 * -0.4 + 2 * 0.48 + 3 * 0.4 + 4 * 3.0) / std::sqrt(12.0),
              2e-6);
  EXPECT_EQ(values(g.out), (std::vector<float>{-1.5f, 0.5f, 1.0f, 1.5f}));
}

// A learned quantizer's forward is the fake_quantize kernel's, bit for bit, with the qparams it
// reports: what makes deploy == QAT eval with learned scales.
TEST(LearnedQuantizerTest, ForwardEqualsTheKernelBitForBit) {
  manual_seed(3);
  const Tensor x = randn({8, 3, 5, 5}) * Scalar(2.0);
  for (const QConfig& qc : {QConfig{.bits = 4, .per_layer = false, .observer = ObserverKind::Lsq},
                            QConfig{.bits = 8, .scheme = Scheme::Affine, .observer = ObserverKind::Lsq, .learn_zero_point = true},
                            QConfig{.bits = 4, .per_layer = false, .observer = ObserverKind::Tqt},
                            QConfig{.bits = 8, .observer = ObserverKind::Tqt, .scale_init = ScaleInit::Range}}) {
    const int64_t channels = qc.per_layer ? 0 : 8;
    std::shared_ptr<Observer> q = qc.observer == ObserverKind::Lsq ? std::shared_ptr<Observer>(initialised<LsqQuantizer>(qc, channels, x))
                                                                     : initialised<TqtQuantizer>(qc, channels, x);
    EXPECT_EQ(values(q->fake_quantize(x)), values(quant::fake_quantize(x, q->calculate_qparams(), qc))) << qc.to_string();
  }
}

// Central differences of L(s) = Σ tanh(w · out(s)) where out is the straight-through surrogate
// LSQ differentiates (the rounding residual round(v) - v frozen at s0: out = (v + r - z)·s), on
// inputs away from the clamp bounds; autograd's gradient divided by g must match.
TEST(LearnedQuantizerTest, ScaleGradientMatchesFiniteDifferencesOfTheSurrogate) {
  const std::vector<float> x = {-0.83f, -0.31f, 0.12f, 0.47f, 0.66f, -0.58f, 0.2f, 2.3f, -2.9f, 0.95f};
  const std::vector<float> w = {0.7f, -1.1f, 0.4f, 1.3f, -0.6f, 0.9f, -0.2f, 0.5f, 0.8f, -1.4f};
  const double s0 = 0.21, lo = -8, hi = 7;  // 4 bits symmetric; x/s of the last three clamped
  const auto loss = [&](double s) {
    double l = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v0 = x[i] / s0, r = std::nearbyint(v0) - v0;
      const double v = x[i] / s;
      const double o = v < lo ? lo * s : v > hi ? hi * s : (v + r) * s;
      l += std::tanh(w[i] * o);
    }
    return l;
  };
  const double h = 1e-6;
  const double fd = (loss(s0 + h) - loss(s0 - h)) / (2 * h);
  const QConfig qc{.bits = 4, .observer = ObserverKind::Lsq};
  auto q = initialised<LsqQuantizer>(qc, 0, vec(x));
  set(q->scale, {static_cast<float>(s0)});
  Tensor out = q->fake_quantize(vec(x));
  tanh(out * vec(w)).sum().backward();
  const double g = 1.0 / std::sqrt(10.0 * 7.0);
  EXPECT_NEAR(q->scale.grad().item<double>() / g, fd, 1e-4 * std::abs(fd) + 1e-5);

  // TQT: s(l) = s0·2^(l - l0) (the ceiling straight through), the same surrogate in s; the
  // chain rule gives dL/dl = dL/ds · s·ln 2.
  const QConfig tq{.bits = 4, .observer = ObserverKind::Tqt};
  auto t = initialised<TqtQuantizer>(tq, 0, vec(x));
  set(t->log2_threshold, {-0.7f});  // ⌈-0.7⌉ = 0: s = 2^(0 - 3) = 0.125
  const double ts = 0.125;
  const auto tloss = [&](double l) {
    const double s = ts * std::exp2(l + 0.7);
    double total = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v0 = x[i] / ts, r = std::nearbyint(v0) - v0;
      const double v = x[i] / s;
      total += std::tanh(w[i] * (v < lo ? lo * s : v > hi ? hi * s : (v + r) * s));
    }
    return total;
  };
  const double tfd = (tloss(-0.7 + h) - tloss(-0.7 - h)) / (2 * h);
  Tensor tout = t->fake_quantize(vec(x));
  tanh(tout * vec(w)).sum().backward();
  EXPECT_NEAR(t->log2_threshold.grad().item<double>() / g, tfd, 1e-4 * std::abs(tfd) + 1e-5);
}

// The paper's initialisation 2·mean|x|/√Qp, per tensor and per channel; range: the min/max
// scale; TQT's threshold: the scale times 2^(b-1), or max|x|.
TEST(LearnedQuantizerTest, InitialisesFromTheFirstTrainingTensor) {
  const Tensor x = from_vector<float>({1, -3, 2, 2, -0.5f, 0.5f}, {2, 3});
  auto per_tensor = initialised<LsqQuantizer>({.bits = 4, .observer = ObserverKind::Lsq}, 0, x);
  EXPECT_FLOAT_EQ(per_tensor->scale.item<float>(), 2.0f * (9.0f / 6.0f) / std::sqrt(7.0f));
  auto per_channel = initialised<LsqQuantizer>({.bits = 4, .per_layer = false, .observer = ObserverKind::Lsq}, 2, x);
  EXPECT_FLOAT_EQ(values(per_channel->scale)[0], 2.0f * 2.0f / std::sqrt(7.0f));
  EXPECT_FLOAT_EQ(values(per_channel->scale)[1], 2.0f * 1.0f / std::sqrt(7.0f));
  auto range = initialised<LsqQuantizer>({.bits = 4, .observer = ObserverKind::Lsq, .scale_init = ScaleInit::Range}, 0, x);
  EXPECT_FLOAT_EQ(range->scale.item<float>(), 3.0f / 7.0f);
  auto tqt = initialised<TqtQuantizer>({.bits = 4, .observer = ObserverKind::Tqt, .scale_init = ScaleInit::Range}, 0, x);
  EXPECT_FLOAT_EQ(tqt->log2_threshold.item<float>(), std::log2(3.0f));
  EXPECT_EQ(tqt->calculate_qparams().scale.item<float>(), 0.5f);  // 2^(⌈log2 3⌉ - 3)
  auto affine = initialised<LsqQuantizer>({.bits = 4, .scheme = Scheme::Affine, .observer = ObserverKind::Lsq}, 0, x);
  const float s = 2.0f * 1.5f / std::sqrt(15.0f);
  EXPECT_FLOAT_EQ(affine->scale.item<float>(), s);
  EXPECT_EQ(affine->zero_point.item<float>(), std::min(15.0f, std::nearbyint(3.0f / s)));
  // Counting goes on; the initialising range stays; eval mode neither initialises nor counts.
  (*per_tensor)(x * Scalar(10.0));
  EXPECT_EQ(per_tensor->num_observations(), 2);
  EXPECT_FLOAT_EQ(per_tensor->scale.item<float>(), 2.0f * 1.5f / std::sqrt(7.0f));
  EXPECT_EQ(per_tensor->max_val().item<float>(), 2.0f);
  LsqQuantizer fresh({.qconfig = {.observer = ObserverKind::Lsq}});
  fresh.eval();
  fresh(x);
  EXPECT_EQ(fresh.num_observations(), 0);
  EXPECT_EQ(values(fresh.fake_quantize(x)), values(x));  // nothing seen: the identity
  EXPECT_EQ(fresh.calculate_qparams().scale.item<float>(), 0.0f);
}

TEST(LearnedQuantizerTest, RefusesWhatItCannotLearn) {
  EXPECT_THAT(error_of([] { TqtQuantizer({.qconfig = {.scheme = Scheme::Affine}}); }), ::testing::HasSubstr("symmetric"));
  EXPECT_THAT(error_of([] { LsqQuantizer({.qconfig = {.formula = Formula::Cambricon}}); }),
              ::testing::HasSubstr("use TqtQuantizer"));
  auto q = std::make_shared<LsqQuantizer>(ObserverOptions{.qconfig = {.observer = ObserverKind::Lsq}, .channels = 3});
  q->train();
  EXPECT_THAT(error_of([&] { (*q)(zeros({2, 4})); }),
              ::testing::HasSubstr("LsqQuantizer: expected 3 channels along axis 0, got a tensor of shape [2, 4]"));
}

// A QConv2d with learned scales: its parameters are the optimizer's, its state_dict holds them
// and a fresh module loading it computes the same; two steps then one more equal three steps
// resumed from a saved model and optimizer state.
TEST(LearnedQuantizerTest, StateDictRoundTripAndResume) {
  for (const QConfig& qc : {QConfig{.bits = 4, .per_layer = false, .observer = ObserverKind::Lsq},
                            QConfig{.bits = 4, .observer = ObserverKind::Tqt}}) {
    manual_seed(5);
    nn::Conv2d conv({.in = 2, .out = 3, .kernel = 3, .padding = 1});
    auto q = QConv2d::from_float(conv, qc);
    q->train();
    const std::string key = qc.observer == ObserverKind::Lsq ? "scale" : "log2_threshold";
    EXPECT_TRUE(q->state_dict().contains("input_observer." + key)) << qc.to_string();
    EXPECT_EQ(q->state_dict().at("weight_observer." + key).numel(), qc.per_layer ? 1 : 3);
    EXPECT_EQ(learned_quantization_parameters(*q).size(), 2u);
    EXPECT_EQ(q->parameters().size(), 4u);  // weight, bias and the two learned scales
    const Tensor x = randn({4, 2, 6, 6});
    const auto step = [&](QConv2d& m, nn::optim::SGD& sgd) {
      sgd.zero_grad();
      const Tensor y = m(x);
      (y * y).mean().backward();
      sgd.step();
    };
    const nn::optim::SGDOptions opt{.lr = 0.05, .momentum = 0.9};
    nn::optim::SGD sgd(q->parameters(), opt);
    step(*q, sgd);
    step(*q, sgd);
    // A checkpoint: copies, not the live tensors state_dict() returns.
    nn::StateDict model_state;
    for (const auto& [k, v] : q->state_dict()) model_state.insert(k, v.detach().clone());
    nn::optim::NamedTensors optim_state;
    for (const auto& [k, v] : sgd.state_dict()) optim_state.emplace_back(k, v.detach().clone());
    step(*q, sgd);

    auto resumed = std::make_shared<QConv2d>(conv.options(), qc);
    resumed->load_state_dict(model_state);
    resumed->train();
    nn::optim::SGD sgd2(resumed->parameters(), opt);
    sgd2.load_state_dict(optim_state);
    step(*resumed, sgd2);
    for (const auto& [k, v] : q->state_dict())
      EXPECT_EQ(to_vector<double>(v.to(DType::Float64)), to_vector<double>(resumed->state_dict().at(k).to(DType::Float64)))
          << qc.to_string() << " " << k;
    q->eval();
    resumed->eval();
    EXPECT_EQ(values((*q)(x)), values((*resumed)(x)));
    // A clone holds its own parameters.
    auto c = std::dynamic_pointer_cast<QConv2d>(q->clone());
    EXPECT_FALSE(c->state_dict().at("input_observer." + key).is_same(q->state_dict().at("input_observer." + key)));
    EXPECT_EQ(learned_quantization_parameters(*c).size(), 2u);
  }
}
