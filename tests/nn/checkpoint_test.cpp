// Training checkpoints: a resumed run continues bit-identically; bad files change nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "nn/golden_util.h"
#include "nn/test_modules.h"
#include "qflow/nn/checkpoint.h"

using namespace qflow;
using namespace qflow::nn;
using nn::testing::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("qflow_checkpoint_{}_{}", ::getpid(), counter_++);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  static inline int counter_ = 0;
};

// Dropout makes the result depend on the RNG stream, BatchNorm adds buffers.
std::shared_ptr<Sequential> make_net(bool track_running_stats = true) {
  return std::make_shared<Sequential>(Conv2d({.in = 3, .out = 4, .kernel = 3, .padding = 1}),
                                      BatchNorm2d({.features = 4, .track_running_stats = track_running_stats}), ReLU(),
                                      Dropout({.p = 0.3}), Flatten(), Linear({.in = 144, .out = 3}));
}

// One training run: its own model, optimizer and schedule.
struct TrainingRun {
  explicit TrainingRun(bool use_adam, bool track_running_stats = true) : net(make_net(track_running_stats)) {
    if (use_adam) {
      opt = std::make_unique<optim::Adam>(net->parameters(), optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-3});
      sched = std::make_unique<optim::LinearWarmup>(*opt, 3, 0.2);
    } else {
      opt = std::make_unique<optim::SGD>(net->parameters(),
                                         optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
      sched = std::make_unique<optim::StepLR>(*opt, 1, 0.7);
    }
  }
  // Steps [first, first + n): each step has its own batch, so resuming at the wrong step shows.
  void train(int64_t first, int64_t n) {
    for (int64_t s = first; s < first + n; ++s) {
      const Tensor x = nn_golden::seq({4, 3, 6, 6}, 0.1 * static_cast<double>(s));
      const Tensor y = from_vector<int64_t>({s % 3, (s + 1) % 3, (s + 2) % 3, s % 3});
      opt->zero_grad();
      F::cross_entropy((*net)(x), y).backward();
      opt->step();
      sched->step();
    }
  }
  std::shared_ptr<Sequential> net;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LRScheduler> sched;
};

std::map<std::string, std::vector<double>> values_of(const StateDict& dict) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [k, t] : dict) out[k] = to_vector<double>(t.to(DType::Float64).contiguous());
  return out;
}
std::map<std::string, std::vector<double>> values_of(const optim::NamedTensors& named) {
  StateDict dict;
  for (const auto& [k, t] : named) dict.insert(k, t);
  return values_of(dict);
}

void resume_is_bit_identical(bool use_adam, const std::string& file) {
  manual_seed(42);
  TrainingRun straight(use_adam);
  nn_golden::fill_params(*straight.net);
  straight.train(0, 4);
  const uint64_t straight_offset = default_generator().offset();

  manual_seed(42);
  TrainingRun first_half(use_adam);
  nn_golden::fill_params(*first_half.net);
  first_half.train(0, 2);
  save_training_checkpoint(file, *first_half.net, *first_half.opt, first_half.sched.get(), {.epoch = 1, .step = 2},
                           {{"note", "halfway"}});

  manual_seed(999);  // a different stream and a differently initialised model: all must be restored
  TrainingRun resumed(use_adam);
  CheckpointMetadata meta;
  const TrainingProgress progress = load_training_checkpoint(file, *resumed.net, *resumed.opt, resumed.sched.get(), &meta);
  EXPECT_EQ(progress, (TrainingProgress{.epoch = 1, .step = 2}));
  EXPECT_EQ(meta.at("note"), "halfway");
  EXPECT_EQ(resumed.sched->last_step(), 2);
  EXPECT_EQ(resumed.opt->lr(0), first_half.opt->lr(0));
  resumed.train(progress.step, 2);

  EXPECT_EQ(values_of(resumed.net->state_dict()), values_of(straight.net->state_dict()));
  EXPECT_EQ(values_of(resumed.opt->state_dict()), values_of(straight.opt->state_dict()));
  EXPECT_EQ(default_generator().offset(), straight_offset);
}

TEST_F(CheckpointTest, ResumedSgdRunIsBitIdentical) { resume_is_bit_identical(false, path("sgd.safetensors")); }

TEST_F(CheckpointTest, ResumedAdamRunIsBitIdentical) { resume_is_bit_identical(true, path("adam.safetensors")); }

TEST_F(CheckpointTest, FileHoldsPrefixedEntries) {
  manual_seed(5);
  TrainingRun run(true);
  run.train(0, 1);
  save_training_checkpoint(path("c.safetensors"), *run.net, *run.opt, run.sched.get(), {.epoch = 3, .step = 7});
  CheckpointMetadata meta;
  const StateDict dict = load(path("c.safetensors"), &meta);
  EXPECT_EQ(meta.at("format"), "qflow.training_checkpoint");
  for (const char* key : {"model.0.weight", "model.1.running_var", "model.1.num_batches_tracked", "model.5.bias",
                          "optimizer.param_groups.0.lr", "optimizer.state.0.exp_avg", "scheduler.last_step",
                          "progress.epoch", "progress.step", "rng.seed", "rng.offset"})
    EXPECT_TRUE(dict.contains(key)) << key;
  EXPECT_EQ(dict.at("progress.step").item<int64_t>(), 7);
  EXPECT_EQ(static_cast<uint64_t>(dict.at("rng.seed").item<int64_t>()), 5u);
  EXPECT_EQ(static_cast<uint64_t>(dict.at("rng.offset").item<int64_t>()), default_generator().offset());
  EXPECT_THAT(error_of([&] {
                save_training_checkpoint(path("d.safetensors"), *run.net, *run.opt, nullptr, {}, {{"format", "x"}});
              }),
              HasSubstr("'format' and 'format_version' are reserved"));
}

// Everything a failed load must leave alone.
struct Snapshot {
  explicit Snapshot(const TrainingRun& run)
      : model(values_of(run.net->state_dict())),
        optimizer(values_of(run.opt->state_dict())),
        lr(run.opt->lr(0)),
        sched_step(run.sched->last_step()),
        rng_offset(default_generator().offset()) {}
  bool operator==(const Snapshot&) const = default;
  std::map<std::string, std::vector<double>> model, optimizer;
  double lr;
  int64_t sched_step;
  uint64_t rng_offset;
};

TEST_F(CheckpointTest, CorruptedFileIsRefusedAndChangesNothing) {
  manual_seed(1);
  TrainingRun source(false);
  source.train(0, 2);
  const std::string good = path("good.safetensors");
  save_training_checkpoint(good, *source.net, *source.opt, source.sched.get(), {.step = 2});
  std::ifstream in(good, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};

  TrainingRun target(false);
  target.train(5, 1);
  const Snapshot before(target);
  auto write = [&](const std::string& name, const std::vector<char>& b) {
    std::ofstream(path(name), std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    return path(name);
  };
  const std::string truncated = write("truncated.safetensors", {bytes.begin(), bytes.end() - 16});
  EXPECT_THAT(error_of([&] { load_training_checkpoint(truncated, *target.net, *target.opt, target.sched.get()); }),
              HasSubstr(truncated));
  std::vector<char> garbled = bytes;
  garbled[9] = '#';  // inside the JSON header
  const std::string bad_json = write("garbled.safetensors", garbled);
  EXPECT_THAT(error_of([&] { load_training_checkpoint(bad_json, *target.net, *target.opt, target.sched.get()); }),
              HasSubstr(bad_json));
  EXPECT_THAT(error_of([&] { load_training_checkpoint(path("none"), *target.net, *target.opt, target.sched.get()); }),
              HasSubstr("cannot open"));
  EXPECT_TRUE(Snapshot(target) == before);
  // The good file still loads into the same target.
  EXPECT_EQ(load_training_checkpoint(good, *target.net, *target.opt, target.sched.get()).step, 2);
  EXPECT_EQ(values_of(target.net->state_dict()), values_of(source.net->state_dict()));
}

TEST_F(CheckpointTest, ModelMismatchRollsBackOptimizerAndScheduler) {
  manual_seed(1);
  TrainingRun source(true);
  source.train(0, 3);
  const std::string file = path("run.safetensors");
  save_training_checkpoint(file, *source.net, *source.opt, source.sched.get(), {.step = 3});

  // Same parameters (so optimizer and scheduler accept their parts), but no BN buffers: the
  // strict model load refuses after the optimizer was already restored.
  TrainingRun target(true, /*track_running_stats=*/false);
  target.train(0, 1);
  const Snapshot before(target);
  const std::string msg =
      error_of([&] { load_training_checkpoint(file, *target.net, *target.opt, target.sched.get()); });
  EXPECT_THAT(msg, HasSubstr("load_training_checkpoint: '" + file + "': the model state does not fit"));
  EXPECT_THAT(msg, HasSubstr("1.running_mean"));
  EXPECT_TRUE(Snapshot(target) == before);
}

TEST_F(CheckpointTest, WrongKindOfFileOrSchedulerIsRefused) {
  manual_seed(1);
  TrainingRun run(false);
  const std::string plain = path("plain.safetensors");
  save(run.net->state_dict(), plain);
  EXPECT_THAT(error_of([&] { load_training_checkpoint(plain, *run.net, *run.opt, run.sched.get()); }),
              HasSubstr("is not a qflow training checkpoint"));

  const std::string with_sched = path("with.safetensors");
  save_training_checkpoint(with_sched, *run.net, *run.opt, run.sched.get(), {});
  EXPECT_THAT(error_of([&] { load_training_checkpoint(with_sched, *run.net, *run.opt, nullptr); }),
              HasSubstr("holds a learning-rate schedule but no scheduler was given"));
  const std::string without = path("without.safetensors");
  save_training_checkpoint(without, *run.net, *run.opt, nullptr, {});
  EXPECT_THAT(error_of([&] { load_training_checkpoint(without, *run.net, *run.opt, run.sched.get()); }),
              HasSubstr("holds no learning-rate schedule but a scheduler was given"));

  TrainingRun adam(true);  // an SGD state has no beta1: the optimizer part is refused
  EXPECT_THAT(error_of([&] { load_training_checkpoint(with_sched, *adam.net, *adam.opt, adam.sched.get()); }),
              HasSubstr("the optimizer state does not fit"));
}

}  // namespace
