// CUDA graphs (Note [Captured device work]) and training steps replayed as graphs (Note [Step
// graphs]): a replay does what the eager code does, bit for bit (deterministic algorithms,
// strict float32), its memory is its own, and what cannot be recorded fails with the reason.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/cuda_test_util.h"
#include "qflow/core/device_graph.h"
#include "qflow/core/device_runtime.h"
#include "qflow/fx/fx.h"
#include "qflow/nn/step_graph.h"
#include "qflow/qflow.h"

namespace qflow {
namespace {

using testing::gpu;

// Bit-for-bit equality of two tensors of any device (float32 or int64), with the first
// differing element in the message.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  if (x.sizes() != y.sizes() || x.dtype() != y.dtype())
    return ::testing::AssertionFailure() << "shapes/dtypes differ: " << fmt::format("{} {} vs {} {}", x.sizes(), x.dtype(), y.sizes(), y.dtype());
  if (std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0) return ::testing::AssertionSuccess();
  if (x.dtype() == DType::Float32) {
    const auto u = to_vector<float>(x), v = to_vector<float>(y);
    for (size_t i = 0; i < u.size(); ++i)
      if (std::memcmp(&u[i], &v[i], sizeof(float)) != 0)
        return ::testing::AssertionFailure() << "element " << i << ": " << u[i] << " vs " << v[i];
  }
  return ::testing::AssertionFailure() << "bytes differ";
}

// Every parameter, buffer and momentum buffer of two models trained the same way.
void expect_same_state(nn::Module& a, nn::Module& b, const std::string& when) {
  const auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) EXPECT_TRUE(same_bits(t, sb.at(name))) << when << ": " << name;
}

void require_deterministic() { set_deterministic_algorithms(true); }

// ---- capture_graph ---------------------------------------------------------------------------------

TEST(CudaGraphTest, CaptureRecordsTheWorkAndEachReplayRepeatsIt) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = zeros({1000}, DType::Float32, gpu());
  Tensor y = zeros({1000}, DType::Float32, gpu());
  auto graph = capture_graph(gpu(), [&] { y.copy_(x * 2.0 + 1.0); });
  ASSERT_NE(graph, nullptr);
  EXPECT_GE(graph->nodes(), 2u);
  synchronize(gpu());
  EXPECT_EQ(y.sum().item<double>(), 0.0) << "capture must not run the work";
  graph->replay();
  EXPECT_EQ(y.sum().item<double>(), 1000.0);
  x.fill_(3.0);  // the graph reads x's memory: a new value, a new result
  graph->replay();
  EXPECT_EQ(y.sum().item<double>(), 7000.0);
}

TEST(CudaGraphTest, ReplaysBumpTheVersionsOfStoragesTheCaptureWrote) {
  QFLOW_REQUIRE_CUDA();
  Tensor w = zeros({16}, DType::Float32, gpu());
  auto graph = capture_graph(gpu(), [&] { w.add_(1.0); });
  const uint64_t before = w.version();
  graph->replay();
  graph->replay();
  EXPECT_EQ(w.version(), before + 2) << "Note [Versions of captured writes]";
  EXPECT_EQ(w.sum().item<double>(), 32.0);
}

TEST(CudaGraphTest, AConvolutionAfterAReplayedWeightUpdateUsesTheNewWeight) {
  QFLOW_REQUIRE_CUDA();
  // The GPU keeps a channels-last copy of each filter until its version changes: a replayed
  // in-place update must make that copy stale, or eager work after it reads the old weight.
  nn::Conv2d conv(nn::Conv2dOptions{.in = 3, .out = 8, .kernel = 3, .padding = 1});
  conv.to(gpu());
  const Tensor x = testing::randn_cpu({2, 3, 8, 8}, 1).to(gpu());
  NoGradGuard no_grad;
  (void)conv(x);  // caches the filter's copy
  Tensor w = conv.weight;
  auto graph = capture_graph(gpu(), [&] { w.mul_(0.5); });
  graph->replay();
  const Tensor got = conv(x);
  const Tensor want = conv2d(x.cpu(), w.cpu(), conv.bias.cpu(), {1, 1}, {1, 1});
  testing::expect_match(got, want, 1e-5, "conv after a replayed weight update");
}

TEST(CudaGraphTest, ACaptureAfterEagerConvolutionsRecordsItsOwnFilterTranspose) {
  QFLOW_REQUIRE_CUDA();
  // Note [Filters in captured graphs]: eager work cached the filter's channels-last copy; a
  // capture served that copy would record no transpose, and its replays would convolve with
  // the weight of the capture's time however the weight changed since.
  nn::Conv2d conv(nn::Conv2dOptions{.in = 3, .out = 8, .kernel = 3, .padding = 1});
  conv.to(gpu());
  const Tensor x = testing::randn_cpu({2, 3, 8, 8}, 2).to(gpu());
  NoGradGuard no_grad;
  (void)conv(x);  // caches the filter's copy eagerly
  Tensor y;
  auto graph = capture_graph(gpu(), [&] { y = conv(x); });
  for (int i = 0; i < 2; ++i) {
    conv.weight.mul_(0.5);  // an eager update between replays
    graph->replay();
    const Tensor want = conv2d(x.cpu(), conv.weight.cpu(), conv.bias.cpu(), {1, 1}, {1, 1});
    testing::expect_match(y, want, 1e-5, "replay " + std::to_string(i) + " after an eager weight update");
    // Eager work after the replay is served eager copies only (the graph's holds the same here).
    testing::expect_match(conv(x), want, 1e-5, "eager convolution after replay " + std::to_string(i));
  }
}

TEST(CudaGraphTest, MemoryOfAGraphIsNotHandedToEagerWork) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = full({1 << 16}, 1.0, DType::Float32, gpu());
  Tensor out;
  // Temporaries of the capture die inside it; their blocks stay the graph's.
  auto graph = capture_graph(gpu(), [&] { out = ((x + 1.0) * 3.0 + (x - 1.0)).sum(); });
  std::vector<Tensor> eager;
  for (int i = 0; i < 8; ++i) eager.push_back(full({1 << 16}, 100.0 + i, DType::Float32, gpu()));
  graph->replay();
  EXPECT_EQ(out.item<double>(), 6.0 * (1 << 16));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(eager[static_cast<size_t>(i)].sum().item<double>(), (100.0 + i) * (1 << 16)) << "eager tensor " << i;
}

TEST(CudaGraphTest, AGraphsMemoryReturnsToTheCacheWhenItAndItsOutputsDie) {
  QFLOW_REQUIRE_CUDA();
  DeviceRuntime& rt = device_runtime(gpu());
  Tensor x = full({1 << 18}, 1.0, DType::Float32, gpu());
  synchronize(gpu());
  const uint64_t before = rt.memory_stats(gpu()).allocated;
  {
    Tensor out;
    auto graph = capture_graph(gpu(), [&] { out = (x * 2.0).exp(); });
    for (int i = 0; i < 3; ++i) graph->replay();
    synchronize(gpu());
    EXPECT_GT(rt.memory_stats(gpu()).allocated, before);
  }
  EXPECT_EQ(rt.memory_stats(gpu()).allocated, before);
  // The blocks are reusable by eager work again.
  const uint64_t reserved = rt.memory_stats(gpu()).reserved;
  Tensor again = (x * 2.0).exp();
  synchronize(gpu());
  EXPECT_EQ(rt.memory_stats(gpu()).reserved, reserved) << "a freed graph block should serve this";
}

TEST(CudaGraphTest, ReadingBackInsideACaptureFailsWithTheReasonAndTheDeviceStaysUsable) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = full({8}, 2.0, DType::Float32, gpu());
  try {
    (void)capture_graph(gpu(), [&] { (void)(x * 2.0).sum().item<double>(); });
    FAIL() << "item() inside a capture must fail";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot be recorded into a CUDA graph"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("copy to the host"), std::string::npos) << e.message();
  }
  EXPECT_EQ((x + 1.0).sum().item<double>(), 24.0) << "eager work after a failed capture";
  auto graph = capture_graph(gpu(), [&] { x.add_(1.0); });  // and a new capture works
  graph->replay();
  EXPECT_EQ(x.sum().item<double>(), 24.0);
}

TEST(CudaGraphTest, DropoutInsideACaptureFailsWithTheReason) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = ones({64}, DType::Float32, gpu());
  try {
    (void)capture_graph(gpu(), [&] { (void)dropout(x, 0.5, true); });
    FAIL() << "dropout inside a capture must fail";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("random draw"), std::string::npos) << e.message();
  }
  EXPECT_EQ(dropout(x, 0.0, true).sum().item<double>(), 64.0);
}

TEST(CudaGraphTest, CopyingFromHostMemoryInsideACaptureFailsWithTheReason) {
  QFLOW_REQUIRE_CUDA();
  Tensor y = zeros({4}, DType::Float32, gpu());
  const Tensor host = ones({4});
  EXPECT_THROW((void)capture_graph(gpu(), [&] { y.copy_(host); }), Error);
  EXPECT_EQ(y.sum().item<double>(), 0.0);
}

TEST(CudaGraphTest, AnExceptionInTheFunctionUndoesTheCapture) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = ones({4}, DType::Float32, gpu());
  try {
    (void)capture_graph(gpu(), [&] {
      (void)(x * 2.0);
      QFLOW_FAIL("the user's own error");
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the user's own error"), std::string::npos) << e.message();
  }
  EXPECT_EQ((x * 2.0).sum().item<double>(), 8.0);
}

// ---- StepGraph: training steps ------------------------------------------------------------------

struct Batch {
  Tensor images, labels;
};

std::vector<Batch> batches(int count, int64_t batch, uint64_t seed) {
  Generator gen(seed);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i)
    out.push_back({randn({batch, 3, 32, 32}, DType::Float32, &gen), randint(0, 10, {batch}, DType::Int64, &gen)});
  return out;
}

// A step function: zero_grad, forward, loss, backward, SGD; returns the loss.
nn::StepGraph::Function sgd_step(nn::Module& model, nn::optim::SGD& sgd) {
  return [&model, &sgd](const std::vector<Tensor>& in) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model(in[0]), in[1]);
    loss.backward();
    sgd.step();
    return std::vector<Tensor>{loss};
  };
}

// Trains `eager` and `graphed` (identical models) on the same batches: `eager` step by step,
// `graphed` through a StepGraph (warm-up 1, then capture and replays). Every loss and, at the
// end, every parameter, buffer and optimizer state must have the same bits.
void expect_graph_equals_eager(nn::Module& eager, nn::Module& graphed, const std::vector<Batch>& data) {
  require_deterministic();
  eager.train();
  graphed.train();
  nn::optim::SGD sgd_eager(eager.parameters(), {.lr = 0.02, .momentum = 0.9, .weight_decay = 5e-4});
  nn::optim::SGD sgd_graphed(graphed.parameters(), {.lr = 0.02, .momentum = 0.9, .weight_decay = 5e-4});
  auto eager_step = sgd_step(eager, sgd_eager);
  nn::StepGraph step(gpu(), sgd_step(graphed, sgd_graphed), {.warmup = 1});
  for (size_t i = 0; i < data.size(); ++i) {
    const Tensor images = data[i].images.to(gpu()), labels = data[i].labels.to(gpu());
    const double want = eager_step({images, labels})[0].item<double>();
    const double got = step({images, labels})[0].item<double>();
    EXPECT_EQ(got, want) << "loss of step " << i;
  }
  EXPECT_NE(step.graph(), nullptr);
  EXPECT_EQ(step.replays(), static_cast<int64_t>(data.size()) - 1);
  expect_same_state(eager, graphed, "after the steps");
  const auto ma = sgd_eager.state_dict(), mb = sgd_graphed.state_dict();
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < ma.size(); ++i)
    EXPECT_TRUE(same_bits(ma[i].second, mb[i].second)) << "optimizer state " << ma[i].first;
}

TEST(CudaStepGraphTest, ResNet18TrainingStepsReplayedEqualTheEagerStepsBitForBit) {
  QFLOW_REQUIRE_CUDA();
  manual_seed(7);
  auto a = models::create("resnet18", {});
  manual_seed(7);
  auto b = models::create("resnet18", {});
  a->to(gpu());
  b->to(gpu());
  expect_graph_equals_eager(*a, *b, batches(4, 32, 11));
}

TEST(CudaStepGraphTest, TracedAndFusedResNet18AsQflowTrainRunsIt) {
  QFLOW_REQUIRE_CUDA();
  const Tensor example = zeros({1, 3, 32, 32});
  manual_seed(8);
  auto a = fx::symbolic_trace(models::create("resnet18", {}), example);
  manual_seed(8);
  auto b = fx::symbolic_trace(models::create("resnet18", {}), example);
  fx::fuse_activations(*a);
  fx::fuse_activations(*b);
  a->to(gpu());
  b->to(gpu());
  expect_graph_equals_eager(*a, *b, batches(4, 32, 12));
}

TEST(CudaStepGraphTest, QatResNet18StepsReplayedEqualTheEagerStepsWithObserversUpdatedInTheGraph) {
  QFLOW_REQUIRE_CUDA();
  const Tensor example = testing::randn_cpu({8, 3, 32, 32}, 4);
  manual_seed(9);
  auto traced = fx::symbolic_trace(models::create("resnet18", {}), example);
  auto a = quant::quantization_aware_training(*traced, example, quant::QConfig{});
  auto b = quant::quantization_aware_training(*traced, example, quant::QConfig{});
  fx::fuse_activations(*a);
  fx::fuse_activations(*b);
  a->to(gpu());
  b->to(gpu());
  // Buffers compared at the end include every observer's min/max and count, and BN's running
  // statistics: the replays updated them.
  expect_graph_equals_eager(*a, *b, batches(4, 32, 13));
}

TEST(CudaStepGraphTest, LsqQatStepsReplayWithoutReadingTheObserverCount) {
  QFLOW_REQUIRE_CUDA();
  const Tensor example = testing::randn_cpu({8, 3, 32, 32}, 5);
  manual_seed(10);
  auto traced = fx::symbolic_trace(models::create("resnet18", {}), example);
  quant::QConfig qc;
  qc.observer = quant::ObserverKind::Lsq;
  auto a = quant::quantization_aware_training(*traced, example, qc);
  auto b = quant::quantization_aware_training(*traced, example, qc);
  a->to(gpu());
  b->to(gpu());
  // Note [Observed, on the host]: after the warm-up step the count is known on the host, so the
  // capture reads nothing back (a read would fail it).
  expect_graph_equals_eager(*a, *b, batches(3, 16, 14));
}

TEST(CudaStepGraphTest, OtherShapesDoNotReplayAndResetCapturesAgainAfterAnEvaluationWithANewLearningRate) {
  QFLOW_REQUIRE_CUDA();
  require_deterministic();
  manual_seed(5);
  auto a = models::create("lenet5", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  manual_seed(5);
  auto b = models::create("lenet5", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  a->to(gpu());
  b->to(gpu());
  nn::optim::SGD sa(a->parameters(), {.lr = 0.05, .momentum = 0.9});
  nn::optim::SGD sb(b->parameters(), {.lr = 0.05, .momentum = 0.9});
  auto eager = sgd_step(*a, sa);
  auto eager_b = sgd_step(*b, sb);
  nn::StepGraph step(gpu(), sgd_step(*b, sb), {.warmup = 1});
  const auto full_batches = batches(3, 16, 20);
  const auto last = batches(1, 5, 21)[0];
  auto run = [&](const Batch& d, bool graphed) {
    const Tensor x = d.images.to(gpu()), y = d.labels.to(gpu());
    const double want = eager({x, y})[0].item<double>();
    const double got = graphed ? step({x, y})[0].item<double>() : eager_b({x, y})[0].item<double>();
    EXPECT_EQ(got, want);
  };
  for (const Batch& d : full_batches) run(d, true);
  const std::vector<Tensor> small{last.images.to(gpu()), last.labels.to(gpu())};
  EXPECT_FALSE(step.matches(small));
  try {
    (void)step(small);
    FAIL() << "a batch of another shape must not replay";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("captured for inputs"), std::string::npos) << e.message();
  }
  run(last, false);  // the last batch, uncaptured, between replays
  // An evaluation between epochs, as qflow-train's: eager convolutions cache the filters of the
  // current weights, which the next capture must not be served (Note [Filters in captured graphs]).
  {
    NoGradGuard no_grad;
    for (nn::Module* m : {a.get(), b.get()}) {
      m->eval();
      (void)(*m)(last.images.to(gpu()));
      m->train();
    }
  }
  sa.set_lr(0, 0.01);
  sb.set_lr(0, 0.01);
  step.reset();
  for (const Batch& d : full_batches) run(d, true);
  expect_same_state(*a, *b, "after a partial batch, an evaluation and a new learning rate");
}

}  // namespace
}  // namespace qflow
