#pragma once
// One training step's forward and backward on the GPU and on the CPU from the same state and
// batch: what the step-by-step parity tests (training_test.cpp, quantize_test.cpp) compare.
#include <utility>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

namespace qflow::testing {

/// Loads `on_cpu` with host copies of `on_gpu`'s parameters and buffers, zeroes both models'
/// gradients, and runs cross_entropy forward and backward of one random CIFAR-shaped batch of
/// `batch` images (drawn on the CPU from `data`) on each. Returns {GPU loss, CPU loss}; the
/// gradients are left in the models.
inline std::pair<double, double> step_from_the_same_state(nn::Module& on_gpu, nn::Module& on_cpu, Generator& data,
                                                          int64_t batch = 16) {
  nn::StateDict state;
  for (const auto& [name, t] : on_gpu.state_dict()) state.insert(name, t.cpu());
  on_cpu.load_state_dict(state);
  const Tensor x = randn({batch, 3, 32, 32}, DType::Float32, &data);
  const Tensor y = randint(0, 10, {batch}, DType::Int64, &data);
  on_gpu.zero_grad();
  on_cpu.zero_grad();
  Tensor gpu_loss = cross_entropy(on_gpu(x.to(gpu())), y.to(gpu()));
  Tensor cpu_loss = cross_entropy(on_cpu(x), y);
  gpu_loss.backward();
  cpu_loss.backward();
  return {gpu_loss.item<double>(), cpu_loss.item<double>()};
}

}  // namespace qflow::testing
