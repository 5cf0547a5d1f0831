#pragma once
// One training step's forward and backward on the GPU and on the CPU from the same state and
// batch: what the step-by-step parity tests (training_test.cpp, quantize_test.cpp) compare.
#include <utility>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

namespace qflow::testing {

/// Host copies of `m`'s parameters and buffers.
inline nn::StateDict host_state(const nn::Module& m) {
  nn::StateDict state;
  for (const auto& [name, t] : m.state_dict()) state.insert(name, t.cpu());
  return state;
}

/// Loads `m` with `state`, zeroes its gradients and runs cross_entropy forward and backward of
/// the batch (`x`, `y`: CPU tensors, moved to `m`'s device `device`). Returns the loss; the
/// gradients are left in the model.
inline double step_from(nn::Module& m, const nn::StateDict& state, const Tensor& x, const Tensor& y,
                        const Device& device = Device()) {
  m.load_state_dict(state);
  m.zero_grad();
  Tensor loss = cross_entropy(m(x.to(device)), y.to(device));
  loss.backward();
  return loss.item<double>();
}

/// Loads `on_cpu` with host copies of `on_gpu`'s parameters and buffers, zeroes both models'
/// gradients, and runs cross_entropy forward and backward of the batch (`x`, `y`: CPU tensors)
/// on each. Returns {GPU loss, CPU loss}; the gradients are left in the models.
inline std::pair<double, double> step_from_the_same_state(nn::Module& on_gpu, nn::Module& on_cpu, const Tensor& x,
                                                          const Tensor& y) {
  const double cpu_loss = step_from(on_cpu, host_state(on_gpu), x, y);
  on_gpu.zero_grad();
  Tensor gpu_loss = cross_entropy(on_gpu(x.to(gpu())), y.to(gpu()));
  gpu_loss.backward();
  return {gpu_loss.item<double>(), cpu_loss};
}

/// The same with one random CIFAR-shaped batch of `batch` images drawn on the CPU from `data`.
inline std::pair<double, double> step_from_the_same_state(nn::Module& on_gpu, nn::Module& on_cpu, Generator& data,
                                                          int64_t batch = 16) {
  const Tensor x = randn({batch, 3, 32, 32}, DType::Float32, &data);
  const Tensor y = randint(0, 10, {batch}, DType::Int64, &data);
  return step_from_the_same_state(on_gpu, on_cpu, x, y);
}

}  // namespace qflow::testing
