#pragma once
// The small training setups the checkpoint fuzz target restores into and the seed generator
// saves from: qflow-train's --resume in miniature (model with BatchNorm buffers, optimizer
// with per-parameter state, LR schedule).
#include <memory>

#include "qflow/core/factory.h"
#include "qflow/nn/nn.h"
#include "qflow/nn/optim.h"

namespace qflow::fuzz {

struct TrainingSetup {
  std::shared_ptr<nn::Sequential> net;
  std::unique_ptr<nn::optim::Optimizer> opt;
  std::unique_ptr<nn::optim::LRScheduler> sched;

  // adam: Adam + LinearWarmup; otherwise SGD with momentum + StepLR.
  explicit TrainingSetup(bool adam)
      : net(std::make_shared<nn::Sequential>(nn::Conv2d({.in = 1, .out = 2, .kernel = 3, .padding = 1}),
                                             nn::BatchNorm2d({.features = 2}), nn::ReLU(), nn::Flatten(),
                                             nn::Linear({.in = 32, .out = 3}))) {
    if (adam) {
      opt = std::make_unique<nn::optim::Adam>(net->parameters(), nn::optim::AdamOptions{.lr = 1e-2});
      sched = std::make_unique<nn::optim::LinearWarmup>(*opt, 3, 0.2);
    } else {
      opt = std::make_unique<nn::optim::SGD>(net->parameters(),
                                             nn::optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
      sched = std::make_unique<nn::optim::StepLR>(*opt, 1, 0.7);
    }
  }

  /// One training step on a fixed batch, as a resumed run would take next.
  void train_step() {
    const Tensor x = arange(0, 32, 1, DType::Float32).view({2, 1, 4, 4});
    const Tensor y = from_vector<int64_t>({0, 2});
    opt->zero_grad();
    nn::functional::cross_entropy((*net)(x), y).backward();
    opt->step();
    sched->step();
  }
};

}  // namespace qflow::fuzz
