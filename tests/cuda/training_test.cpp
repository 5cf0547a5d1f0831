// Float training on the GPU against the CPU (issue 33, item 5): the same ResNet18 from the same
// weights and batches, trained 10 SGD steps on each device in strict float32, and what moving a
// model, an optimizer and a checkpoint between devices must keep. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/nn/checkpoint.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::gpu;
using qflow::testing_util::relative_error;

namespace {

struct TrainingRun {
  std::vector<double> losses;
  nn::StateDict final_state;
};

TrainingRun train_steps(Device device, int steps) {
  manual_seed(7);
  auto model = models::create("resnet18", {});
  model->to(device);
  nn::optim::SGD sgd(model->parameters(), {.lr = 0.02, .momentum = 0.9, .weight_decay = 5e-4});
  Generator data(11);
  TrainingRun run;
  model->train();
  for (int s = 0; s < steps; ++s) {
    Tensor x = randn({16, 3, 32, 32}, DType::Float32, &data).to(device);
    Tensor y = randint(0, 10, {16}, DType::Int64, &data).to(device);
    Tensor loss = cross_entropy((*model)(x), y);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    run.losses.push_back(loss.item<double>());
  }
  run.final_state = model->state_dict();
  return run;
}

// Bound: strict float32 on both devices, the kernels summing in different orders (cuDNN's
// algorithms, block reductions vs OpenBLAS/oneDNN): each op agrees to ~1e-6 relative, and ten
// steps of SGD with batch-norm statistics amplify that by the step's Lipschitz constant per
// step. 1e-3 on the losses and 1e-2 on any weight tensor (max-abs relative to its largest
// element) leave room for that and still catch a wrong gradient, which moves a loss by > 1e-2
// within a few steps at this learning rate.
TEST(CudaTrainingTest, TenStepsOfResNet18OnTheGpuEndWhereTheCpuRunEnds) {
  QFLOW_REQUIRE_CUDA();
  const TrainingRun on_gpu = train_steps(gpu(), 10);
  const TrainingRun on_cpu = train_steps(Device::cpu(), 10);
  for (size_t s = 0; s < on_cpu.losses.size(); ++s) {
    std::printf("[ parity ] step %zu loss cpu %.6f gpu %.6f\n", s, on_cpu.losses[s], on_gpu.losses[s]);
    EXPECT_NEAR(on_gpu.losses[s], on_cpu.losses[s], 1e-3 * std::abs(on_cpu.losses[s])) << "step " << s;
  }
  double worst = 0;
  for (const auto& [name, want] : on_cpu.final_state) {
    const Tensor& got = on_gpu.final_state.at(name);
    EXPECT_EQ(got.device(), gpu()) << name;
    const double err = relative_error(got.cpu(), want);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-2) << name;
  }
  std::printf("[ parity ] worst weight error after 10 steps: %.3g\n", worst);
}

TEST(CudaTrainingTest, ModuleToMovesParametersBuffersAndGradsInPlace) {
  QFLOW_REQUIRE_CUDA();
  auto model = models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  const Tensor weight = model->parameters().front();  // a handle a member or optimizer holds
  nn::optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({4, 1, 28, 28});
  Tensor y = from_vector<int64_t>({0, 1, 2, 3});
  cross_entropy((*model)(x), y).backward();
  sgd.step();  // momentum buffers now exist on the CPU
  const Tensor before = weight.detach().clone();
  model->to(gpu());
  sgd.to(gpu());
  EXPECT_EQ(weight.device(), gpu()) << "the handle follows the move";
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_EQ(weight.grad().device(), gpu());
  for (const Tensor& b : model->buffers()) EXPECT_EQ(b.device(), gpu());
  EXPECT_EQ(relative_error(weight.cpu(), before), 0.0);
  // Training continues on the GPU, then the model comes back with the same values.
  cross_entropy((*model)(x.to(gpu())), y.to(gpu())).backward();
  sgd.step();
  const Tensor trained = weight.cpu();
  model->to(Device::cpu());
  EXPECT_EQ(weight.device(), Device::cpu());
  EXPECT_EQ(relative_error(weight, trained), 0.0);
}

TEST(CudaTrainingTest, ACheckpointWrittenOnTheGpuResumesOnTheCpu) {
  QFLOW_REQUIRE_CUDA();
  manual_seed(3);
  auto model = models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  model->to(gpu());
  nn::optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({4, 1, 28, 28}).to(gpu());
  Tensor y = from_vector<int64_t>({0, 1, 2, 3}).to(gpu());
  cross_entropy((*model)(x), y).backward();
  sgd.step();
  const auto path = std::filesystem::temp_directory_path() / "qflow_cuda_checkpoint.safetensors";
  nn::save_training_checkpoint(path.string(), *model, sgd, nullptr, {.epoch = 1, .step = 1});
  manual_seed(4);
  auto cpu_model = models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  nn::optim::SGD cpu_sgd(cpu_model->parameters(), {.lr = 0.1, .momentum = 0.9});
  nn::load_training_checkpoint(path.string(), *cpu_model, cpu_sgd, nullptr);
  std::filesystem::remove(path);
  const auto want = model->state_dict();
  for (const auto& [name, t] : cpu_model->state_dict()) {
    EXPECT_EQ(t.device(), Device::cpu()) << name;
    EXPECT_EQ(relative_error(t, want.at(name).cpu()), 0.0) << name;
  }
}

TEST(CudaTrainingTest, TensorsShowTheirDeviceAndOnlyHostReadsSynchronise) {
  QFLOW_REQUIRE_CUDA();
  Tensor t = from_vector<float>({1.5f, -2.0f}).to(gpu());
  EXPECT_EQ(to_string(t), "tensor([ 1.5000, -2.0000], device='cuda:0')");
  EXPECT_EQ(t.sum().item<double>(), -0.5);
  EXPECT_EQ(to_vector<float>(t), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(zeros({3}, DType::Int64, gpu()).device(), gpu());
  EXPECT_EQ(zeros_like(t).device(), gpu());
  const DeviceMemoryStats stats = device_runtime(gpu()).memory_stats(gpu());
  EXPECT_GT(stats.allocated, 0u);
  EXPECT_GE(stats.reserved, stats.allocated);
  EXPECT_GE(stats.peak_allocated, stats.allocated);
}

TEST(CudaTrainingTest, GradientsFlowBackAcrossADeviceCopy) {
  QFLOW_REQUIRE_CUDA();
  Tensor x = from_vector<float>({1, 2, 3}).requires_grad_();
  Tensor y = x.to(gpu()).mul(from_vector<float>({4, 5, 6}).to(gpu())).sum();
  y.backward();
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(to_vector<float>(x.grad()), (std::vector<float>{4, 5, 6}));
}

TEST(CudaTrainingTest, AnEmptyCacheReturnsTheCachedBlocks) {
  QFLOW_REQUIRE_CUDA();
  DeviceRuntime& rt = device_runtime(gpu());
  { Tensor big = empty({64 << 20}, DType::Float32, gpu()); }
  EXPECT_GT(rt.memory_stats(gpu()).reserved, rt.memory_stats(gpu()).allocated);
  rt.empty_cache(gpu());
  EXPECT_EQ(rt.memory_stats(gpu()).reserved, rt.memory_stats(gpu()).allocated);
}

}  // namespace

namespace {

// The fused update (Note [Fused optimizer step]) against the CPU op, every option, across several
// chunks (a 70,000-element parameter spans two), plus a non-contiguous parameter that takes the
// per-parameter path. Float32 on both sides, the same formula per element: 1e-6 relative covers
// the CPU computing `g + wd·p` through a double alpha.
TEST(CudaTrainingTest, FusedSgdUpdateEqualsTheCpuOp) {
  QFLOW_REQUIRE_CUDA();
  for (const bool nesterov : {false, true}) {
    for (const bool first_step : {true, false}) {
      Generator gen(5);
      // The third parameter is a transposed view: not contiguous on either device.
      TensorList cpu_p{randn({70000}, DType::Float32, &gen), randn({3, 5}, DType::Float32, &gen),
                       randn({4, 6}, DType::Float32, &gen).t()};
      TensorList cpu_g, cpu_b, gpu_p, gpu_g, gpu_b;
      for (const Tensor& p : cpu_p) {
        cpu_g.push_back(randn(p.sizes(), DType::Float32, &gen));
        cpu_b.push_back(randn(p.sizes(), DType::Float32, &gen));
        gpu_g.push_back(cpu_g.back().to(gpu()));
        gpu_b.push_back(cpu_b.back().to(gpu()));
      }
      gpu_p = {cpu_p[0].to(gpu()), cpu_p[1].to(gpu()), cpu_p[2].t().to(gpu()).t()};
      ASSERT_FALSE(gpu_p[2].is_contiguous());
      sgd_update_(cpu_p, cpu_g, cpu_b, 0.05, 0.9, 0.1, 5e-4, nesterov, first_step);
      sgd_update_(gpu_p, gpu_g, gpu_b, 0.05, 0.9, 0.1, 5e-4, nesterov, first_step);
      for (size_t i = 0; i < cpu_p.size(); ++i) {
        EXPECT_LE(relative_error(gpu_p[i].cpu(), cpu_p[i]), 1e-6) << "param " << i << " nesterov " << nesterov;
        EXPECT_LE(relative_error(gpu_b[i].cpu(), cpu_b[i]), 1e-6) << "buffer " << i << " nesterov " << nesterov;
      }
    }
  }
}

}  // namespace

namespace {

// Twelve 1×4×4 images whose pixels are their index, labels index % 3.
class CountingImages final : public data::Dataset {
 public:
  int64_t size() const override { return 12; }
  data::Example get(int64_t index) const override {
    return {full({1, 4, 4}, Scalar(static_cast<double>(index)), DType::Float32), index % 3};
  }
  const std::vector<std::string>& class_names() const override { return names_; }

 private:
  std::vector<std::string> names_{"a", "b", "c"};
};

// Note [Pinned batches]: the same batches, built in page-locked memory, copied to the GPU
// while the host goes on, and reused only once their copies ran.
TEST(CudaTrainingTest, PinnedBatchesEqualOrdinaryOnesAndReachTheGpu) {
  QFLOW_REQUIRE_CUDA();
  auto dataset = std::make_shared<CountingImages>();
  for (const int workers : {0, 2}) {
    data::DataLoader plain(dataset, {.batch_size = 5, .shuffle = true, .seed = 3, .num_workers = workers});
    data::DataLoader pinned(dataset, {.batch_size = 5, .shuffle = true, .seed = 3, .num_workers = workers, .pin_memory = true});
    for (int epoch = 0; epoch < 3; ++epoch) {  // later epochs reuse the pinned blocks
      auto a = plain.begin();
      for (data::Batch& b : pinned) {
        ASSERT_FALSE(a == plain.end());
        EXPECT_EQ(b.images.device(), Device::cpu());
        const Tensor images = b.images.to(gpu()), labels = b.labels.to(gpu());
        EXPECT_EQ(relative_error(images.cpu(), (*a).images), 0.0) << "workers " << workers << " epoch " << epoch;
        EXPECT_EQ(to_vector<int64_t>(labels), to_vector<int64_t>((*a).labels));
        ++a;
      }
    }
  }
}

}  // namespace
