// qflow-train under `mpirun -np 2` (Note [qflow-train under mpirun]): two processes train as
// one with the global batch, checkpoints move between world sizes, and a rank that dies or
// fails stops the whole job with a message instead of a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "qflow/core/device_runtime.h"
#include "qflow/qflow.h"
#include "relative_error.h"
#include "watchdog.h"

using namespace qflow;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::ChildProcess;
using testing_util::run_watched;

namespace {

const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

std::string mpirun(int np) {
  // Root may run mpirun only when told so (CI runs as root); more ranks than cores is fine here.
  return fmt::format("mpirun --oversubscribe -np {}{} ", np, ::geteuid() == 0 ? " --allow-run-as-root" : "");
}

// LeNet5 on 384 Fashion-MNIST images, global batch 64, 6 steps per epoch. The convolutions run
// on im2col + OpenBLAS whatever engine the suite was started with: oneDNN picks its kernels by
// batch size, so one process with 64 images and two with 32 would run different kernels, whose
// rounding differences six SGD steps grow to 1e-3 (measured in a portable build); these tests
// are about the data-parallel arithmetic, which must agree to float32 reordering (1e-5).
std::string train_command(int np, const std::string& dir, int64_t epochs, const std::string& extra) {
  return "QFLOW_CONV_ENGINE=im2col " + (np > 1 ? mpirun(np) : std::string()) + QFLOW_BIN_DIR +
         fmt::format("/qflow-train --model lenet5 --dataset fashion-mnist --subset 384 --test-subset 128 --epochs {} "
                     "--batch-size {} --lr 0.05 --workers 1 --threads 1 --checkpoint-dir {} {}",
                     epochs, 64 / np, dir, extra);
}

int exit_status(int wait_status) { return testing_util::exit_code(wait_status); }

// Every run is watched (tests/watchdog.h): a job that hangs is killed and the test says so.
int run_train(int np, const std::string& dir, const std::string& extra, int64_t epochs = 2) {
  return exit_status(run_watched(train_command(np, dir, epochs, extra), dir + ".out"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string("qflow_dist_train_") + name + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d.string();
}

// The model tensors of two checkpoints agree within `tolerance` (relative to each tensor's scale).
void expect_same_model(const std::string& a_file, const std::string& b_file, double tolerance) {
  const nn::StateDict a = nn::load(a_file), b = nn::load(b_file);
  ASSERT_EQ(a.keys(), b.keys());
  int64_t compared = 0;
  for (const auto& [key, t] : a) {
    if (key.rfind("model.", 0) != 0 && key.rfind("optimizer.", 0) != 0) continue;
    EXPECT_LE(testing_util::relative_error(t, b.at(key)), tolerance) << key;
    ++compared;
  }
  EXPECT_GT(compared, 8);
}

// float32 sums of 32 + 32 images instead of 64 in one, over 6 to 12 SGD steps.
constexpr double kTolerance = 1e-5;

class DistributedTrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    if (std::system("command -v mpirun > /dev/null") != 0) GTEST_SKIP() << "mpirun is not installed";
  }
  void TearDown() override {
    for (const auto& d : dirs_) {
      std::filesystem::remove_all(d);
      std::filesystem::remove(d + ".out");
    }
  }
  std::string dir(const char* name) { return dirs_.emplace_back(temp_dir(name)); }
  std::vector<std::string> dirs_;
};

TEST_F(DistributedTrainCli, TwoProcessesTrainAsOneWithTheGlobalBatch) {
  const std::string one = dir("one"), two = dir("two");
  ASSERT_EQ(run_train(1, one, "", 1), 0) << read_text(one + ".out");
  ASSERT_EQ(run_train(2, two, "", 1), 0) << read_text(two + ".out");
  expect_same_model(one + "/last.safetensors", two + "/last.safetensors", kTolerance);
  const std::string out = read_text(two + ".out");
  EXPECT_THAT(out, HasSubstr("data-parallel on 2 processes (1 threads each): global batch 64 = 2 × --batch-size 32"));
  // Rank 0 alone reports: one epoch line, one final line.
  EXPECT_EQ(out.find("epoch 1/1: train loss"), out.rfind("epoch 1/1: train loss")) << out;
  nn::CheckpointMetadata meta;
  (void)nn::load(two + "/last.safetensors", &meta);
  EXPECT_EQ(meta.at("world_size"), "2");
  EXPECT_EQ(meta.at("global_batch"), "64");
  // Sharded evaluation adds up to the whole test subset, as one process measures it.
  const std::string log_one = read_text(one + "/log.csv"), log_two = read_text(two + "/log.csv");
  EXPECT_FALSE(log_two.empty());
  EXPECT_EQ(log_one.substr(0, log_one.find('\n')), log_two.substr(0, log_two.find('\n')));  // same columns
}

TEST_F(DistributedTrainCli, SyncBatchNormTrainsResNet18AndIsRefusedForQat) {
  // Two steps of ResNet18 with BatchNorm over the global batch (its numerics are proven against
  // one process in the distributed tests; here: the tool path through trace and conversion).
  const std::string d = dir("sync_bn");
  const std::string resnet = "--model resnet18 --subset 64 --test-subset 32 --epochs 1 --batch-size 16 --no-augment";
  const std::string base = mpirun(2) + QFLOW_BIN_DIR + "/qflow-train --dataset fashion-mnist --workers 1 --threads 1 " +
                           "--checkpoint-dir " + d + " " + resnet;
  ASSERT_EQ(exit_status(run_watched(base + " --sync-bn", d + ".out")), 0) << read_text(d + ".out");
  EXPECT_THAT(read_text(d + ".out"), HasSubstr("epoch 1/1: train loss"));
  EXPECT_NE(exit_status(run_watched(base + " --sync-bn --qat", d + ".out")), 0);
  EXPECT_THAT(read_text(d + ".out"), HasSubstr("--sync-bn applies to float training; --qat and --ptq fold the BatchNorms"));
}

// Note [qflow-train under mpirun on GPUs]: each process takes the GPU of its local rank, so an
// explicit GPU index (every process on one GPU) is refused; without a GPU, every rank stops
// with the device's reason before training.
TEST_F(DistributedTrainCli, GpusUnderMpirunTakeOnePerProcessAndSayWhyWhenThereAreNone) {
  const std::string d = dir("gpus");
  const std::string base = mpirun(2) + QFLOW_BIN_DIR + "/qflow-train --dataset fashion-mnist --workers 1 --threads 1 " +
                           "--subset 64 --test-subset 32 --epochs 1 --checkpoint-dir " + d;
  EXPECT_NE(exit_status(run_watched(base + " --device cuda:0", d + ".out")), 0);
  EXPECT_THAT(read_text(d + ".out"), HasSubstr("under mpirun (2 processes) give --device cuda: each process trains on "
                                               "the GPU of its local rank"));
  if (device_count(DeviceType::CUDA) > 0) return;  // with GPUs, tests/cuda and tools/gpu-check cover the run
  EXPECT_NE(exit_status(run_watched(base + " --device cuda", d + ".out")), 0);
  const std::string out = read_text(d + ".out");
  EXPECT_TRUE(out.find("built without its CUDA backend") != std::string::npos ||
              out.find("no usable CUDA device on this machine") != std::string::npos)
      << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("epoch 1/1")));
}

TEST_F(DistributedTrainCli, CheckpointsResumeWithAnotherNumberOfProcesses) {
  const std::string straight = dir("straight"), two_then_one = dir("two_then_one"), one_then_two = dir("one_then_two");
  ASSERT_EQ(run_train(1, straight, ""), 0) << read_text(straight + ".out");
  ASSERT_EQ(run_train(2, two_then_one, "--stop-after 1"), 0) << read_text(two_then_one + ".out");
  ASSERT_EQ(run_train(1, two_then_one, "--resume"), 0) << read_text(two_then_one + ".out");
  EXPECT_THAT(read_text(two_then_one + ".out"),
              HasSubstr("saved by 2 process(es) with global batch 64; now 1 with global batch 64"));
  ASSERT_EQ(run_train(1, one_then_two, "--stop-after 1"), 0) << read_text(one_then_two + ".out");
  ASSERT_EQ(run_train(2, one_then_two, "--resume"), 0) << read_text(one_then_two + ".out");
  for (const auto& d : {two_then_one, one_then_two})
    expect_same_model(straight + "/last.safetensors", d + "/last.safetensors", kTolerance);
}

// The rows of a --predictions file, each split at its commas.
std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string>& row = rows.emplace_back();
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) row.push_back(cell);
  }
  return rows;
}

TEST_F(DistributedTrainCli, PredictionsGatheredFromTheShardsAreOneProcesssFile) {
  // 101 test images: shards of 51 and 50 (Note [Gathered predictions]).
  const std::string one = dir("predictions_one"), two = dir("predictions_two");
  std::filesystem::create_directories(one);
  manual_seed(3);
  nn::save(models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28})->state_dict(),
           one + "/weights.safetensors");
  for (const auto& [np, d] : {std::pair{1, one}, std::pair{2, two}}) {
    std::string command = train_command(np, d, 1, "--eval-only --weights " + one + "/weights.safetensors --predictions " +
                                                      d + ".csv");
    command.replace(command.find("--test-subset 128"), 17, "--test-subset 101");
    ASSERT_EQ(exit_status(run_watched(command, d + ".out")), 0) << read_text(d + ".out");
  }
  const auto a = csv_rows(one + ".csv"), b = csv_rows(two + ".csv");
  std::filesystem::remove(one + ".csv");
  std::filesystem::remove(two + ".csv");
  ASSERT_EQ(a.size(), 102u);  // the header and one row per image
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(a[0], b[0]);
  for (size_t i = 1; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), 13u);
    ASSERT_EQ(b[i].size(), 13u);
    EXPECT_EQ(std::vector(a[i].begin(), a[i].begin() + 3), std::vector(b[i].begin(), b[i].begin() + 3)) << "row " << i;
    for (size_t c = 3; c < 13; ++c) EXPECT_NEAR(std::stod(a[i][c]), std::stod(b[i][c]), 1e-5) << "row " << i;
  }
}

// Rewrites a training checkpoint as if it had been saved `step` batches into epoch 1.
void set_progress(const std::string& file, int64_t step) {
  nn::CheckpointMetadata meta;
  nn::StateDict dict = nn::load(file, &meta);
  NoGradGuard no_grad;
  Tensor epoch = dict.at("progress.epoch"), at = dict.at("progress.step");
  epoch.fill_(0);
  at.fill_(step);
  nn::save(dict, file, meta);
}

TEST_F(DistributedTrainCli, ResumesWithinAnEpochWhenTheImagesDivide) {
  const std::string d = dir("mid_epoch");
  ASSERT_EQ(run_train(1, d, "--stop-after 1", 1), 0) << read_text(d + ".out");
  const std::string saved = d + "/saved-by-one.safetensors";
  std::filesystem::copy_file(d + "/last.safetensors", saved);
  // 3 batches of 64 = 192 images: 2 global batches of 2 × 48.
  set_progress(d + "/last.safetensors", 3);
  const std::string resume = train_command(2, d, 1, "--resume").replace(
      train_command(2, d, 1, "--resume").find("--batch-size 32"), 15, "--batch-size 48");
  ASSERT_EQ(exit_status(run_watched(resume, d + ".out")), 0) << read_text(d + ".out");
  EXPECT_THAT(read_text(d + ".out"), HasSubstr("resuming at epoch 1 batch 2 (saved by 1 process(es) with global batch 64; "
                                               "now 2 with global batch 96)"));
  // 1 batch of 64 is not a whole number of batches of 96: refused, naming the numbers.
  std::filesystem::copy_file(saved, d + "/last.safetensors", std::filesystem::copy_options::overwrite_existing);
  set_progress(d + "/last.safetensors", 1);
  EXPECT_NE(exit_status(run_watched(resume, d + ".out")), 0);
  EXPECT_THAT(read_text(d + ".out"), HasSubstr("saved 1 batches of 64 images into its epoch (64 images), not a whole number "
                                               "of this run's global batches of 96 (2 processes × --batch-size 48)"));
}

// The pid of the process whose environment says it is rank `rank` of a job training into `dir`.
pid_t find_rank(int rank, const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(entry.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("qflow-train") == std::string::npos || cmdline.find(dir) == std::string::npos ||
        cmdline.find("mpirun") != std::string::npos)
      continue;
    std::string env = read_text(entry.path().string() + "/environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    if (env.find(fmt::format("\nOMPI_COMM_WORLD_RANK={}\n", rank)) != std::string::npos) return std::stoi(name);
  }
  return -1;
}

// Kills what is left of a job training into `dir` (ranks outside mpirun's process group).
void kill_ranks(const std::string& dir) {
  for (int r : {0, 1})
    if (pid_t p = find_rank(r, dir); p > 0) ::kill(p, SIGKILL);
}

// Starts a 2-rank job training into `dir`, sends `signal` to rank 1 once training is under way
// (a checkpoint written) and returns the job's wait status. What these tests assert is that
// the job then ends — with a message, rather than hanging — not how soon: the watchdog
// (tests/watchdog.h) fails the test, saying the job hung, only after minutes. `env` prefixes
// the command.
int signal_rank_one(const std::string& dir, int signal, const std::string& env) {
  ChildProcess job = ChildProcess::shell(env + train_command(2, dir, 50, "--checkpoint-every 2"), dir + ".out");
  pid_t victim = -1;
  const bool under_way = job.wait_until(
      [&] { return std::filesystem::exists(dir + "/last.safetensors") && (victim = find_rank(1, dir)) > 0; },
      "the job to write a checkpoint with rank 1 running");
  if (!under_way || ::kill(victim, signal) != 0) {
    if (!job.hung()) ADD_FAILURE() << "the job ended before rank 1 could be signalled:\n" << read_text(dir + ".out");
    job.kill_group();
    kill_ranks(dir);
    return job.status().value_or(-1);
  }
  const int status = job.wait(fmt::format("the job to end after rank 1 was sent signal {}", signal));
  if (job.hung()) kill_ranks(dir);
  return status;
}

TEST_F(DistributedTrainCli, AKilledRankStopsTheOthersWithAMessage) {
  const std::string d = dir("killed");
  const int status = signal_rank_one(d, SIGKILL, "");
  EXPECT_NE(exit_status(status), 0);
  const std::string out = read_text(d + ".out");
  EXPECT_THAT(out, HasSubstr("rank 1")) << out;
  EXPECT_EQ(find_rank(0, d), -1) << "rank 0 outlived the job";
  // The last checkpoint is intact: a single process resumes from it.
  nn::CheckpointMetadata meta;
  EXPECT_NO_THROW((void)nn::load(d + "/last.safetensors", &meta)) << out;
  EXPECT_EQ(run_train(1, d, "--resume --stop-after 1", 50), 0) << read_text(d + ".out");
}

TEST_F(DistributedTrainCli, AStoppedRankMakesTheOthersAbortAfterTheDeadline) {
  // A rank that hangs (here: stopped) never exits, so mpirun sees nothing: the collective
  // deadline (QFLOW_DIST_TIMEOUT) makes the waiting rank abort the job, saying what it waited for.
  const std::string d = dir("stopped");
  const int status = signal_rank_one(d, SIGSTOP, "QFLOW_DIST_TIMEOUT=3 ");
  EXPECT_NE(exit_status(status), 0);
  const std::string out = read_text(d + ".out");
  EXPECT_THAT(out, HasSubstr("qflow: rank 0 of 2: ")) << out;
  EXPECT_THAT(out, HasSubstr("did not complete within 3 s: another rank has stopped or died")) << out;
  for (int r : {0, 1}) EXPECT_EQ(find_rank(r, d), -1) << "rank " << r << " outlived the job";
}

TEST_F(DistributedTrainCli, AFailingRankAbortsTheJobNamingItself) {
  const std::string d = dir("failing");
  // No checkpoint to resume from: every rank fails at once and says which it is. "At once":
  // the job ends by the error itself, not by a rank waiting out the collective deadline for
  // the other (whose message would say so); a job that never ends fails under the watchdog.
  EXPECT_NE(run_train(2, d, "--resume"), 0);
  const std::string out = read_text(d + ".out");
  EXPECT_THAT(out, HasSubstr("of 2: qflow-train: error: qflow-train: --resume: no checkpoint at")) << out;
  EXPECT_THAT(out, HasSubstr("every process reads the checkpoint")) << out;
  EXPECT_THAT(out, Not(HasSubstr("did not complete within"))) << out;
}

}  // namespace
