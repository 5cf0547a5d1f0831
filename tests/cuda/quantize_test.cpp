// Quantization on the GPU (issue 34, item 1) against the CPU kernels: fake_quantize, its
// backward and quantize, per tensor (activations, in NCHW and channels-last order) and per
// channel (weights, axis 0 and 1), symmetric and affine grids of 2 to 16 bits, float32 and
// float64; and a QAT ResNet18 step on both devices. See cuda/kernels/quantize_ops.cpp.
//
// Bound: exact. The GPU computes x / s + z, the clamp, the rounding (half to even) and
// (q - z) * s with one correctly rounded operation each, as the CPU does (Note [Quantization
// arithmetic on the GPU]), so the integer grid and every value agree bit for bit; a mismatch is
// printed with its count (a rounding tie decided otherwise would show up there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/same_state_step.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::channels_last;
using qflow::testing::gpu;
using qflow::testing::randn_cpu;
using qflow::testing_util::cosine_distance;
using qflow::testing_util::relative_error;

namespace {

// Elements that differ (NaN equals NaN), printed when any do.
int64_t mismatches(const Tensor& got, const Tensor& want, const std::string& what) {
  const auto g = to_vector<double>(got.cpu().contiguous()), w = to_vector<double>(want.contiguous());
  EXPECT_EQ(g.size(), w.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < std::min(g.size(), w.size()); ++i) {
    const bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]));
    if (!same && bad++ < 3) std::printf("[ quant ] %s: element %zu gpu %.9g cpu %.9g\n", what.c_str(), i, g[i], w[i]);
  }
  if (bad) std::printf("[ quant ] %s: %lld of %zu elements differ\n", what.c_str(), static_cast<long long>(bad), w.size());
  return bad;
}

struct Grid {
  int64_t bits;
  bool affine;
  int64_t qmin() const { return affine ? 0 : -(int64_t{1} << (bits - 1)); }
  int64_t qmax() const { return affine ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1; }
  std::string name() const { return std::to_string(bits) + (affine ? "-bit affine" : "-bit symmetric"); }
};

// Scales that put the values of a standard normal sample across the grid (a few clip), and
// zero points in it (affine) or 0.
std::pair<Tensor, Tensor> qparams(const Grid& g, int64_t channels, DType dtype) {
  std::vector<double> s, z;
  for (int64_t c = 0; c < channels; ++c) {
    s.push_back((2.5 + 0.25 * static_cast<double>(c % 7)) / static_cast<double>(g.qmax() - g.qmin()) * 2.0);
    z.push_back(g.affine ? std::round(static_cast<double>(g.qmax() + g.qmin()) / 2.0 + static_cast<double>(c % 3)) : 0.0);
  }
  Tensor st = from_vector<double>(s).to(dtype), zt = from_vector<double>(z);
  if (channels == 1) st = st.reshape({}), zt = zt.reshape({});
  return {st, zt};
}

void expect_fake_quantize_matches(const Tensor& x_cpu, const Tensor& x_gpu, const Grid& g, int64_t axis,
                                  int64_t channels, const std::string& what) {
  auto [s, z] = qparams(g, channels, x_cpu.dtype());
  const Tensor want = quant::fake_quantize(x_cpu, s, z, g.qmin(), g.qmax(), axis);
  const Tensor got = quant::fake_quantize(x_gpu, s.to(gpu()), z.to(gpu()), g.qmin(), g.qmax(), axis);
  EXPECT_EQ(got.device(), gpu()) << what;
  EXPECT_EQ(mismatches(got, want, what + " forward"), 0) << what;
  // The backward: the clipped estimator's mask.
  const Tensor gy = randn_cpu(x_cpu.sizes(), 77, x_cpu.dtype());
  const Tensor want_g = quant::fake_quantize_backward(gy, x_cpu, s, z, g.qmin(), g.qmax(), axis);
  const Tensor got_g = quant::fake_quantize_backward(gy.to(gpu()), x_gpu, s.to(gpu()), z.to(gpu()), g.qmin(), g.qmax(), axis);
  EXPECT_EQ(mismatches(got_g, want_g, what + " backward"), 0) << what;
  // The integers (8 bits and fewer fit uint8/int8; the rest int32).
  const DType qtype = g.bits > 8 ? DType::Int32 : (g.affine ? DType::UInt8 : DType::Int8);
  const Tensor want_q = quant::quantize(x_cpu, s, z, g.qmin(), g.qmax(), axis, qtype);
  const Tensor got_q = quant::quantize(x_gpu, s.to(gpu()), z.to(gpu()), g.qmin(), g.qmax(), axis, qtype);
  EXPECT_EQ(got_q.dtype(), qtype) << what;
  EXPECT_EQ(mismatches(got_q, want_q, what + " quantize"), 0) << what;
}

}  // namespace

TEST(CudaQuantizeTest, PerTensorActivationsInBothLayoutsEveryGridAndDtype) {
  QFLOW_REQUIRE_CUDA();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Grid& g : {Grid{8, false}, Grid{8, true}, Grid{4, false}, Grid{2, true}, Grid{16, true}, Grid{16, false}}) {
      const Tensor x = randn_cpu({4, 16, 9, 7}, 5, dtype);
      const std::string what = g.name() + " " + std::string(dtype_name(dtype));
      expect_fake_quantize_matches(x, x.to(gpu()), g, 0, 1, what + " NCHW");
      expect_fake_quantize_matches(x, channels_last(x.to(gpu())), g, 0, 1, what + " channels-last");
      expect_fake_quantize_matches(x, x.to(gpu()).transpose(2, 3).contiguous().transpose(2, 3), g, 0, 1,
                                   what + " strided");
    }
  }
}

TEST(CudaQuantizeTest, ChannelsLastActivationsKeepTheirLayout) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = channels_last(randn_cpu({2, 8, 5, 5}, 6).to(gpu()));
  const Tensor y = quant::fake_quantize(x, full({}, 0.05, DType::Float32, gpu()), zeros({}, DType::Int64, gpu()), -128, 127);
  EXPECT_TRUE(qflow::testing::is_channels_last(y));
}

TEST(CudaQuantizeTest, PerChannelWeightsAlongEitherAxis) {
  QFLOW_REQUIRE_CUDA();
  for (const Grid& g : {Grid{8, false}, Grid{4, false}, Grid{8, true}, Grid{3, true}}) {
    const Tensor w = randn_cpu({64, 32, 3, 3}, 8);
    expect_fake_quantize_matches(w, w.to(gpu()), g, 0, 64, g.name() + " per-channel axis 0");
    expect_fake_quantize_matches(w, w.to(gpu()), g, 1, 32, g.name() + " per-channel axis 1");
    expect_fake_quantize_matches(w, w.to(gpu()).transpose(0, 1).contiguous().transpose(0, 1), g, 0, 64,
                                 g.name() + " per-channel, strided weight");
    const Tensor lin = randn_cpu({10, 512}, 9);
    expect_fake_quantize_matches(lin, lin.to(gpu()), g, 0, 10, g.name() + " linear weight");
  }
}

TEST(CudaQuantizeTest, ZeroScaleNaNInfinityAndTiesAsTheCpu) {
  QFLOW_REQUIRE_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Ties: x / s + z exactly half-way between integers (s a power of two), both ways of even.
  const Tensor x = from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 100.f, -100.f, nan, inf, -inf, 0.f, 3.25f});
  for (const Grid& g : {Grid{8, false}, Grid{8, true}}) {
    const Tensor s = full({}, 1.0, DType::Float32), z = full({}, g.affine ? 3.0 : 0.0, DType::Float32);
    const Tensor want = quant::fake_quantize(x, s, z, g.qmin(), g.qmax());
    const Tensor got = quant::fake_quantize(x.to(gpu()), s.to(gpu()), z.to(gpu()), g.qmin(), g.qmax());
    EXPECT_EQ(mismatches(got, want, g.name() + " ties and non-finite values"), 0);
    const Tensor want_q = quant::quantize(x, s, z, g.qmin(), g.qmax(), 0, DType::Int32);
    const Tensor got_q = quant::quantize(x.to(gpu()), s.to(gpu()), z.to(gpu()), g.qmin(), g.qmax(), 0, DType::Int32);
    EXPECT_EQ(mismatches(got_q, want_q, g.name() + " integers of ties and non-finite values"), 0);
  }
  // A zero scale (a zero range) is the identity forward and backward.
  const Tensor zero = zeros({}, DType::Float32, gpu());
  const Tensor y = quant::fake_quantize(x.to(gpu()), zero, zero, -128, 127);
  EXPECT_EQ(mismatches(y, x, "zero scale"), 0);
}

TEST(CudaQuantizeTest, BadArgumentsAreRefusedAsOnTheCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = randn_cpu({4, 3}, 1).to(gpu());
  const Tensor s = full({}, 0.1, DType::Float32, gpu()), z = zeros({}, DType::Int64, gpu());
  try {
    (void)quant::fake_quantize(x, full({5}, 0.1, DType::Float32, gpu()), zeros({5}, DType::Int64, gpu()), -128, 127, 1);
    ADD_FAILURE() << "a per-channel scale of the wrong length was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("per-channel scale has 5 elements"), std::string::npos) << e.message();
  }
  try {
    (void)quant::quantize(x, zeros({}, DType::Float32, gpu()), z, -128, 127, 0, DType::Int8);
    ADD_FAILURE() << "quantize with a zero scale was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("has no integer grid"), std::string::npos) << e.message();
  }
  try {
    (void)quant::fake_quantize(x, s.cpu(), z.cpu(), -128, 127);
    ADD_FAILURE() << "a CPU scale for a GPU input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("expected all tensors on one device"), std::string::npos) << e.message();
  }
}

TEST(CudaQuantizeTest, ChooseQparamsEqualsTheCpuForEveryFormula) {
  QFLOW_REQUIRE_CUDA();
  // Ranges of every kind: both signs, one-sided, empty (lo == hi, zero), tiny and huge.
  std::vector<float> lo{-1.0f, -0.3f, 0.0f, 0.2f, -5e-7f, -3.0e4f, 0.0f, -1.5f, -2.0f, 1.0f},
      hi{1.0f, 2.7f, 4.0f, 0.9f, 1e-6f, 1.0e3f, 0.0f, -0.25f, -2.0f, 1.0f};
  Generator gen(21);
  const std::vector<float> a = to_vector<float>(randn({500}, DType::Float32, &gen).mul(Scalar(3.0)));
  const std::vector<float> b = to_vector<float>(randn({500}, DType::Float32, &gen).mul(Scalar(3.0)));
  for (size_t i = 0; i < a.size(); ++i) lo.push_back(std::min(a[i], b[i])), hi.push_back(std::max(a[i], b[i]));
  const int64_t n = static_cast<int64_t>(lo.size());
  const Tensor tlo = from_vector<float>(lo, {n}), thi = from_vector<float>(hi, {n});
  for (int64_t bits : {2, 4, 8, 16}) {
    for (bool symmetric : {true, false}) {
      for (bool cambricon : {false, true}) {
        if (cambricon && !symmetric) continue;  // QConfig refuses it
        quant::QConfig qc;
        qc.bits = bits;
        qc.scheme = symmetric ? quant::Scheme::Symmetric : quant::Scheme::Affine;
        qc.formula = cambricon ? quant::Formula::Cambricon : quant::Formula::Google;
        const std::string what = std::to_string(bits) + (symmetric ? " symmetric" : " affine") + (cambricon ? " cambricon" : "");
        const auto [want_s, want_z] = quant::choose_qparams(tlo, thi, qc);
        const auto [got_s, got_z] = quant::choose_qparams(tlo.to(gpu()), thi.to(gpu()), qc);
        EXPECT_EQ(got_s.device(), gpu());
        EXPECT_EQ(mismatches(got_s, want_s, what + " scale"), 0);
        EXPECT_EQ(mismatches(got_z, want_z, what + " zero point"), 0);
      }
    }
  }
}

// The observers on the GPU record what they record on the CPU from the same batches, without
// reading a statistic back (Note [Observers stay on their device]), and a frozen one keeps its
// range on both.
TEST(CudaQuantizeTest, ObserversOnTheGpuRecordWhatTheCpuRecords) {
  QFLOW_REQUIRE_CUDA();
  quant::QConfig affine;
  affine.scheme = quant::Scheme::Affine;
  struct Case {
    std::string name;
    std::function<nn::ModulePtr()> make;
    std::vector<int64_t> sizes;
  };
  const std::vector<Case> cases{
      {"moving average, symmetric", [] { return std::make_shared<quant::MovingAverageMinMaxObserver>(); }, {8, 16, 6, 6}},
      {"moving average, affine",
       [affine] { return std::make_shared<quant::MovingAverageMinMaxObserver>(quant::ObserverOptions{.qconfig = affine}); },
       {8, 16, 6, 6}},
      {"min/max per channel (weights)",
       [] { return std::make_shared<quant::MinMaxObserver>(quant::ObserverOptions{.channels = 32}); }, {32, 16, 3, 3}},
      {"min/max accumulated (calibration)",
       [] { return std::make_shared<quant::MinMaxObserver>(quant::ObserverOptions{.accumulate = true}); }, {8, 16, 6, 6}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    nn::ModulePtr on_cpu = c.make(), on_gpu = c.make();
    on_gpu->to(gpu());
    on_cpu->train();
    on_gpu->train();
    for (int step = 0; step < 6; ++step) {
      if (step == 4) {  // frozen from here: the ranges stay
        quant::freeze_observers(*on_cpu, true);
        quant::freeze_observers(*on_gpu, true);
      }
      const Tensor x = randn_cpu(c.sizes, 40 + step).mul(Scalar(1.0 + step));
      (void)(*on_cpu)(x);
      (void)(*on_gpu)(channels_last(x.to(gpu())));
      for (const auto& [name, want] : on_cpu->named_buffers()) {
        for (const auto& [gname, gbuf] : on_gpu->named_buffers()) {
          if (gname != name) continue;
          EXPECT_EQ(gbuf.device(), gpu()) << name;
          // 1e-6: m · old + (1 − m) · new may be one fused multiply-add on one side.
          EXPECT_LE(relative_error(gbuf.cpu().to(DType::Float64), want.to(DType::Float64)), 1e-6)
              << "step " << step << ": " << name;
        }
      }
    }
    const auto* cpu_obs = dynamic_cast<const quant::Observer*>(on_cpu.get());
    const auto* gpu_obs = dynamic_cast<const quant::Observer*>(on_gpu.get());
    ASSERT_TRUE(cpu_obs && gpu_obs);
    EXPECT_EQ(gpu_obs->num_observations(), 4);
    const quant::QParams want = cpu_obs->calculate_qparams(), got = gpu_obs->calculate_qparams();
    EXPECT_EQ(got.scale.device(), gpu());
    EXPECT_LE(relative_error(got.scale.cpu(), want.scale), 1e-6);
    // A range one ulp apart may round a zero point to the neighbouring integer: 1 in 255.
    EXPECT_LE(relative_error(got.zero_point.cpu(), want.zero_point), 1.0 / 255);
  }
}

// QAT ResNet18 steps on the GPU, each compared with the CPU from the same state.
//
// A QAT model is a step function of its input: a value within rounding of a grid boundary lands
// in the neighbouring bucket after any change in its last bits, which moves the next layer's
// input by a whole grid step, and through twenty layers such flips multiply. Measured on the CPU
// alone (a QAT ResNet18 with random weights, batch 16): moving the input images by a relative
// 1e-7 moves the gradients by a cosine distance of 0.16 and the observers' ranges by 2% at 8
// bits, by 1.2e-3 and 1.4e-4 at 16 bits, and the float model's gradients by 1.5e-6. No fixed
// bound fits both grids, and one loose enough for 8 bits would pass broken kernels. So the GPU
// is held to the CPU's own sensitivity, measured in the same test: the GPU's step may differ from
// the CPU's by a few times what the CPU's step moves when its input moves by a relative 1e-5
// (about the rounding error of one convolution's sums: the GPU's operations differ from the
// CPU's by that much, as that input does). A broken kernel (a wrong mask, fold or channel)
// differs by far more, at 16 bits most of all.
namespace {

// The worst differences between two models' last steps: the loss (relative), the gradients'
// directions (cosine distance, worst parameter) and the buffers (relative, worst buffer: the
// observers' ranges and batch norm's running statistics).
struct StepDifference {
  double loss = 0, gradient = 0, buffer = 0;
};

StepDifference difference(const nn::Module& a, double loss_a, const nn::Module& b, double loss_b) {
  StepDifference d;
  d.loss = std::abs(loss_a - loss_b) / std::abs(loss_b);
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  EXPECT_EQ(pa.size(), pb.size());
  for (size_t p = 0; p < std::min(pa.size(), pb.size()); ++p)
    d.gradient = std::max(d.gradient, cosine_distance(pa[p].second.grad().cpu(), pb[p].second.grad()));
  const auto ba = a.named_buffers(), bb = b.named_buffers();
  EXPECT_EQ(ba.size(), bb.size());
  for (size_t i = 0; i < std::min(ba.size(), bb.size()); ++i)
    d.buffer = std::max(d.buffer, relative_error(ba[i].second.cpu(), bb[i].second));
  return d;
}

void expect_qat_steps_match(const quant::QConfig& qconfig, int steps) {
  manual_seed(3);
  const Tensor example = randn_cpu({16, 3, 32, 32}, 4);
  auto traced = fx::symbolic_trace(models::create("resnet18", {}), example);
  auto on_gpu = quant::quantization_aware_training(*traced, example, qconfig);
  auto on_cpu = quant::quantization_aware_training(*traced, example, qconfig);
  auto moved = quant::quantization_aware_training(*traced, example, qconfig);  // the CPU, input moved
  on_gpu->to(gpu());
  for (nn::Module* m : {on_gpu.get(), on_cpu.get(), moved.get()}) m->train();
  nn::optim::SGD sgd(on_gpu->parameters(), {.lr = 0.02, .momentum = 0.9, .weight_decay = 5e-4});
  Generator data(12), noise(13);
  for (int step = 0; step < steps; ++step) {
    const Tensor x = randn({16, 3, 32, 32}, DType::Float32, &data);
    const Tensor y = randint(0, 10, {16}, DType::Int64, &data);
    const Tensor x_moved = x * (randn(x.sizes(), DType::Float32, &noise) * Scalar(1e-5) + Scalar(1.0));
    // Before the GPU's forward moves its observers and running statistics.
    const double loss_moved = qflow::testing::step_from(*moved, qflow::testing::host_state(*on_gpu), x_moved, y);
    const auto [got, want] = qflow::testing::step_from_the_same_state(*on_gpu, *on_cpu, x, y);
    const StepDifference gpu = difference(*on_gpu, got, *on_cpu, want);
    const StepDifference cpu = difference(*moved, loss_moved, *on_cpu, want);
    std::printf("[ quant ] %s step %d: GPU vs CPU loss %.3g gradient %.3g buffer %.3g; CPU with its input moved by "
                "1e-5: loss %.3g gradient %.3g buffer %.3g\n",
                qconfig.to_string().c_str(), step, gpu.loss, gpu.gradient, gpu.buffer, cpu.loss, cpu.gradient,
                cpu.buffer);
    // 4x the CPU's own sensitivity, plus a floor for a sensitivity near 0 by chance (the loss, one
    // number, most often).
    EXPECT_LE(gpu.loss, 4 * cpu.loss + 1e-4) << "step " << step;
    EXPECT_LE(gpu.gradient, 4 * cpu.gradient + 1e-5) << "step " << step;
    EXPECT_LE(gpu.buffer, 4 * cpu.buffer + 1e-5) << "step " << step;
    sgd.step();
  }
}

}  // namespace

// The default QConfig: 8 bits, symmetric, per tensor, moving-average observers, QConvBN with
// the running fold.
TEST(CudaQuantizeTest, QatResNet18StepsOnTheGpuMatchTheCpuFromTheSameState) {
  QFLOW_REQUIRE_CUDA();
  expect_qat_steps_match(quant::QConfig{}, 2);
}

// 16 bits (a small sensitivity: a tight bound), affine, per-channel weights, the batch fold.
TEST(CudaQuantizeTest, QatResNet18Steps16BitPerChannelBatchFoldMatchTheCpu) {
  QFLOW_REQUIRE_CUDA();
  expect_qat_steps_match(quant::QConfig{.bits = 16, .scheme = quant::Scheme::Affine, .per_layer = false,
                                        .bn_fold = quant::BnFold::Batch},
                         2);
}
