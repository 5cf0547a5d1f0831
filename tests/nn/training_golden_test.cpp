// Five optimizer steps on a small conv net against PyTorch 1.13: every parameter and every
// BatchNorm buffer afterwards (goldens from tests/golden/nn_layers.py, training_goldens()).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nn/golden_util.h"
#include "nn/nn_golden.inc"

using namespace qflow;
using nn_golden::Golden;

namespace {

using NamedGoldens = std::vector<std::pair<std::string, Golden>>;

// The script's train(): fixed batch seq((4, 3, 8, 8), 0.5), labels {0, 2, 1, 2}, mean
// cross-entropy, 5 steps.
template <class Opt, class Options>
void train_and_compare(const Options& options, const NamedGoldens& want_state, const Golden& want_losses) {
  auto net = nn_golden::small_net();
  nn_golden::fill_params(*net);
  Opt opt(net->parameters(), options);
  const Tensor x = nn_golden::seq({4, 3, 8, 8}, 0.5);
  const Tensor labels = from_vector<int64_t>({0, 2, 1, 2});
  std::vector<float> losses;
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    Tensor loss = F::cross_entropy((*net)(x), labels);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  nn_golden::expect_close(from_vector<float>(losses), want_losses, 1e-5, 1e-6, "losses");

  const nn::StateDict state = net->state_dict();
  ASSERT_EQ(state.size(), want_state.size());
  for (const auto& [name, want] : want_state) {
    ASSERT_TRUE(state.contains(name)) << name;
    nn_golden::expect_close(state.at(name), want, 1e-5, 1e-6, name);
  }
  EXPECT_EQ(net->get_buffer("1.num_batches_tracked").item<int64_t>(), 5);
}

TEST(TrainingGoldenTest, FiveSgdMomentumStepsMatchPyTorch) {
  train_and_compare<nn::optim::SGD>(nn::optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4},
                                    nn_golden::train_sgd_state, nn_golden::train_sgd_losses);
}

TEST(TrainingGoldenTest, FiveAdamStepsMatchPyTorch) {
  train_and_compare<nn::optim::Adam>(nn::optim::AdamOptions{.lr = 1e-2}, nn_golden::train_adam_state,
                                     nn_golden::train_adam_losses);
}

}  // namespace
