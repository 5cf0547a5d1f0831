// Crash-safe training with qflow-train on a generated CIFAR-10 directory (LeNet5, 60 images):
// SIGKILL at random moments and in the middle of checkpoint writes, then --resume, ends with
// the bytes of an uninterrupted run; a full disk keeps the previous checkpoint and stops with
// the file, the bytes and the reason; a non-finite loss stops the run naming the step, and
// --detect-anomaly names the module and op where the first NaN/Inf appeared.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "data/test_files.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::data::testing;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kBatches = 10;  // 60 training images in batches of 6

class TrainCrashTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // data_batch_1..5 with 12 records each, test_batch with 20.
    for (int b = 1; b <= 5; ++b)
      write_bytes(path("cifar/data_batch_" + std::to_string(b) + ".bin"), cifar_batch(12, 12 * (b - 1)));
    write_bytes(path("cifar/test_batch.bin"), cifar_batch(20, 100));
  }

  std::vector<std::string> args(const std::string& run, int64_t epochs, std::vector<std::string> extra = {},
                                const std::string& lr = "0.05") const {
    std::vector<std::string> a{std::string(QFLOW_BIN_DIR) + "/qflow-train", "--model", "lenet5", "--dataset", "cifar10",
                               "--data", path("cifar"), "--epochs", std::to_string(epochs), "--batch-size", "6",
                               "--lr", lr, "--workers", "1", "--threads", "1", "--checkpoint-dir", path(run)};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // Starts qflow-train with `a`, output to `log`; `pause_ms` preloads the fixture
  // tests/fixtures/pause_write.cpp, which pauses every checkpoint write that long part-way
  // through, `file_limit` a file-size limit (bytes) with SIGXFSZ ignored, as a full disk.
  static pid_t spawn(const std::vector<std::string>& a, const std::string& log, int pause_ms = 0, rlim_t file_limit = 0) {
    // Truncated here, not in the child: a kill that lands before the child runs must not leave
    // the previous segment's output in the log.
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t pid = fork();
    if (pid != 0) {
      ::close(fd);
      return pid;
    }
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    if (pause_ms > 0) {
      // Inside the tensor data of every file qflow-train saves for LeNet5 (0.25 MB and more).
      ::setenv("QFLOW_PAUSE_WRITE_AT", "65536", 1);
      ::setenv("QFLOW_PAUSE_WRITE_MS", std::to_string(pause_ms).c_str(), 1);
      ::setenv("LD_PRELOAD", QFLOW_PAUSE_WRITE_LIBRARY, 1);
      // A GCC ASan build (tools/run-tests --sanitize) loads its runtime as a shared library and
      // refuses to start when a preloaded library comes before it; the fixture only defines write.
      const char* asan = std::getenv("ASAN_OPTIONS");
      const std::string options = asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : std::string();
      ::setenv("ASAN_OPTIONS", (options + "verify_asan_link_order=0").c_str(), 1);
    }
    if (file_limit > 0) {
      std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing
      struct rlimit limit {};
      ::getrlimit(RLIMIT_FSIZE, &limit);
      limit.rlim_cur = file_limit;
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    std::vector<char*> argv;
    for (const std::string& s : a) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }

  // Runs to the end; returns the exit status (-1 if killed by a signal), output in output_.
  int run(const std::vector<std::string>& a, rlim_t file_limit = 0) {
    const pid_t pid = spawn(a, path("run.log"), 0, file_limit);
    int status = 0;
    waitpid(pid, &status, 0);
    output_ = text(path("run.log"));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static std::string text(const std::string& file) {
    const Bytes b = read_bytes(file);
    return {b.begin(), b.end()};
  }

  // The temporary files of unfinished checkpoint writes in `run`.
  std::set<std::string> temporaries(const std::string& run) const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(path(run))) {
      const std::string name = e.path().filename().string();
      if (name.front() == '.' && name.ends_with(".tmp")) out.insert(name);
    }
    return out;
  }

  std::string output_;
};

// log.csv without the timing columns (images/s, seconds), which differ between runs.
std::string log_without_timings(const std::string& csv) {
  std::string out;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    size_t cut = 0;
    for (int commas = 0; commas < 6 && cut != std::string::npos; ++commas) cut = line.find(',', cut + 1);
    out += line.substr(0, cut) + "\n";
  }
  return out;
}

// Optimizer steps a training checkpoint has done (epoch * batches + step); -1 without a file.
// Also checks it is a complete training checkpoint with finite weights.
int64_t checkpoint_steps(const std::string& file) {
  if (!fs::exists(file)) return -1;
  nn::CheckpointMetadata meta;
  const nn::StateDict d = nn::load(file, &meta);  // validates every header entry and range
  EXPECT_EQ(meta.at("format"), "qflow.training_checkpoint");
  for (const auto& [key, t] : d)
    if (key.starts_with("model.")) {
      EXPECT_EQ(autograd::describe_non_finite(t), "") << key;
    }
  return d.at("progress.epoch").item<int64_t>() * kBatches + d.at("progress.step").item<int64_t>();
}

}  // namespace

TEST_F(TrainCrashTest, TwentySigkillsAtRandomMomentsAndMidWriteThenResumeEndBitIdentical) {
  const int64_t epochs = 6;
  // The reference: uninterrupted, checkpoints at epoch ends only.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run(args("straight", epochs)), 0) << output_;
  const double straight_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const char* env_seed = std::getenv("QFLOW_KILL_TEST_SEED");
  const uint64_t seed = env_seed ? std::strtoull(env_seed, nullptr, 10) : std::random_device{}();
  std::cout << "kill test seed " << seed << " (rerun with QFLOW_KILL_TEST_SEED=" << seed << ")\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  // 7 of the 20 kills wait for a checkpoint write (the fixture pauses it part-way), the
  // others come after a random delay of up to a quarter of the straight run, which lands in
  // start-up, training steps, checkpoint writes, evaluation or log writes.
  std::vector<bool> mid_write(20, false);
  std::fill(mid_write.begin(), mid_write.begin() + 7, true);
  std::shuffle(mid_write.begin(), mid_write.end(), rng);
  constexpr int kPauseMs = 150;  // the kill comes 0-25 ms into it: a wide margin for a loaded machine

  int kills = 0, completed = 0, landed_in_writes = 0;
  bool finished = false;  // the current interrupted run has completed
  int64_t last_steps = -1;
  const std::string interrupted = "interrupted";
  const std::string last = path(interrupted + "/last.safetensors");
  for (int segment = 0; kills < 20 || !finished; ++segment) {
    ASSERT_LT(segment, 200) << "the run never completed";
    const bool resume = fs::exists(last);
    const bool in_write = kills < 20 && mid_write[static_cast<size_t>(kills)];
    auto a = args(interrupted, epochs, {"--checkpoint-every", "1"});
    if (resume) a.push_back("--resume");
    const std::string log = path("segment.log");
    const std::set<std::string> temps_before = fs::exists(path(interrupted)) ? temporaries(interrupted) : std::set<std::string>{};
    const pid_t pid = spawn(a, log, in_write ? kPauseMs : 0);
    int status = 0;
    std::string seen_temp;
    if (kills >= 20) {
      waitpid(pid, &status, 0);  // enough kills: let it finish
    } else if (in_write) {
      // Kill during the k-th write of this segment (k = 1..3), somewhere in its pause.
      const int k = std::uniform_int_distribution<int>(1, 3)(rng);
      std::set<std::string> writes;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (fs::exists(path(interrupted)))
          for (const std::string& t : temporaries(interrupted))
            if (t.find(".safetensors.") != std::string::npos && !temps_before.contains(t) && writes.insert(t).second)
              seen_temp = t;
        if (static_cast<int>(writes.size()) >= k) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (static_cast<int>(writes.size()) >= k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 25)(rng)));
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
    } else {
      const auto delay = std::uniform_real_distribution<double>(0, straight_ms / 4)(rng);
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(delay * 1000)));
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    const std::string out = text(log);
    if (WIFSIGNALED(status)) {
      ASSERT_EQ(WTERMSIG(status), SIGKILL) << out;
      ++kills;
      if (in_write) {
        // The kill landed inside the write: its temporary is still there, the target intact.
        EXPECT_TRUE(fs::exists(path(interrupted + "/" + seen_temp))) << seen_temp;
      }
      if (fs::exists(path(interrupted))) {
        std::set<std::string> fresh = temporaries(interrupted);
        for (const std::string& t : temps_before) fresh.erase(t);
        landed_in_writes += fresh.empty() ? 0 : 1;  // this kill left an unfinished write
      }
    } else {
      ASSERT_TRUE(WIFEXITED(status)) << out;
      ASSERT_EQ(WEXITSTATUS(status), 0) << out;
      ++completed;
      finished = true;
    }
    // The latest checkpoint is whole and never older than the one before.
    const int64_t steps = checkpoint_steps(last);
    EXPECT_GE(steps, last_steps);
    // A resumed segment started from that checkpoint (the line is flushed as soon as printed).
    std::smatch at;
    if (resume && std::regex_search(out, at, std::regex("resuming at epoch (\\d+) batch (\\d+)"))) {
      EXPECT_EQ((std::stoll(at[1]) - 1) * kBatches + std::stoll(at[2]), last_steps) << out;
    }
    last_steps = steps;

    if (WIFEXITED(status) && kills < 20) {
      // Finished before 20 kills (a slow start or a lucky run): compare it, start another.
      EXPECT_EQ(read_bytes(last), read_bytes(path("straight/last.safetensors")));
      fs::remove_all(path(interrupted));
      last_steps = -1;
      finished = false;
    }
  }
  std::cout << kills << " kills (" << landed_in_writes << " left an unfinished checkpoint write), " << completed
            << " completed run(s)\n";

  // The interrupted run ends with exactly the files of the straight one.
  EXPECT_EQ(read_bytes(last), read_bytes(path("straight/last.safetensors")));
  EXPECT_EQ(read_bytes(path(interrupted + "/best.safetensors")), read_bytes(path("straight/best.safetensors")));
  EXPECT_EQ(log_without_timings(text(path(interrupted + "/log.csv"))),
            log_without_timings(text(path("straight/log.csv"))));
  // steps.csv is written before each checkpoint and cut back to it on --resume: every step once.
  EXPECT_EQ(text(path(interrupted + "/steps.csv")), text(path("straight/steps.csv")));
  EXPECT_EQ(checkpoint_steps(last), epochs * kBatches);
  EXPECT_EQ(temporaries(interrupted), std::set<std::string>{});  // every unfinished write was cleaned up
  EXPECT_GE(landed_in_writes, 7);
}

TEST_F(TrainCrashTest, AFullDiskKeepsThePreviousCheckpointAndStopsWithTheFileBytesAndReason) {
  ASSERT_EQ(run(args("run", 1)), 0) << output_;
  const Bytes before = read_bytes(path("run/last.safetensors"));

  // Room for 100000 bytes per file: the logs fit, the 0.5 MB checkpoint of step 12 does not.
  EXPECT_EQ(run(args("run", 2, {"--resume", "--checkpoint-every", "3"}), 100000), 1) << output_;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(output_, m, std::regex("qflow-train: error: could not save the training state after step "
                                                       "12: save: writing '(.*)' failed after 100000 of (\\d+) bytes: "
                                                       "File too large \\(any previous file at that path is unchanged\\)")))
      << output_;
  EXPECT_EQ(m[1], path("run/last.safetensors"));
  // The state of step 12 is the size of the epoch-1 checkpoint, up to its metadata strings.
  EXPECT_NEAR(static_cast<double>(std::stoll(m[2])), static_cast<double>(before.size()), 64.0);
  EXPECT_EQ(read_bytes(path("run/last.safetensors")), before);
  EXPECT_EQ(temporaries("run"), std::set<std::string>{});

  // With room again the run continues from the intact checkpoint and ends as a straight run.
  ASSERT_EQ(run(args("run", 2, {"--resume"})), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("resuming at epoch 2 batch 0"));
  ASSERT_EQ(run(args("straight", 2)), 0) << output_;
  EXPECT_EQ(read_bytes(path("run/last.safetensors")), read_bytes(path("straight/last.safetensors")));
}

namespace {

// LeNet5's initial weights for this data set with `key` changed by `edit`, saved to `file`.
void write_weights(const std::string& file, const std::string& key, const std::function<void(Tensor&)>& edit) {
  manual_seed(0);
  auto model = models::create("lenet5", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  nn::StateDict sd = model->state_dict();
  Tensor t = sd.at(key);
  edit(t);
  nn::save(sd, file);
}

}  // namespace

TEST_F(TrainCrashTest, ANonFiniteLossStopsTheRunAndDetectAnomalyNamesTheModuleAndOp) {
  // fc1's weights are finite but so large that its products overflow float32.
  write_weights(path("huge.safetensors"), "fc1.weight", [](Tensor& w) { w.fill_(3e38); });
  EXPECT_EQ(run(args("huge", 1, {"--weights", path("huge.safetensors")})), 1);
  EXPECT_THAT(output_, HasSubstr("qflow-train: error: step 1 (epoch 1, batch 1 of 10): the training loss is nan; stopped "
                                 "before the optimizer step, so no weight was updated with it (no checkpoint was saved "
                                 "before). Rerun with --detect-anomaly to find the module and op where the first NaN/Inf "
                                 "appears"));
  EXPECT_EQ(run(args("huge", 1, {"--weights", path("huge.safetensors"), "--detect-anomaly"})), 1);
  EXPECT_THAT(output_, HasSubstr("qflow-train: error: step 1 (epoch 1, batch 1 of 10): detect_anomaly: forward: op "
                                 "'addmm' in module 'fc1' (Linear) returned inf in "));
  EXPECT_THAT(output_, HasSubstr("of shape [6, 120]; all its inputs were finite, so this op produced it"));

  // One infinite weight in conv2 is found before conv2 runs.
  write_weights(path("inf.safetensors"), "conv2.weight",
                [](Tensor& w) { w.view({-1}).narrow(0, 10, 1).fill_(std::numeric_limits<float>::infinity()); });
  EXPECT_EQ(run(args("inf", 1, {"--weights", path("inf.safetensors"), "--detect-anomaly"})), 1);
  EXPECT_THAT(output_, HasSubstr("qflow-train: error: step 1 (epoch 1, batch 1 of 10): detect_anomaly: parameter "
                                 "'conv2.weight' of module 'conv2' (Conv2d) holds inf in 1 of 2400 elements before the "
                                 "module runs"));

  // A learning rate of 1000 diverges after a few steps: the run stops at the first non-finite
  // loss or weight (Note [Non-finite training]) and the checkpoints written before stay finite.
  auto diverging = [&](const std::string& dir, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--checkpoint-every", "2"});
    return run(args(dir, 3, extra, "1000"));
  };
  EXPECT_EQ(diverging("lr", {}), 1);
  std::smatch stop;
  ASSERT_TRUE(std::regex_search(
      output_, stop,
      std::regex("error: step (\\d+) \\(epoch 1, batch \\d+ of 10\\): (the training loss is (nan|inf|-inf); stopped "
                 "before the optimizer step, so no weight was updated with it|the optimizer step made parameter "
                 "'[a-z0-9.]+' non-finite \\((nan|inf)[^)]*\\) while the loss was finite \\([^)]*\\): the gradients or "
                 "the update overflowed; stopped without saving it) \\((.*) holds the last saved state\\)\\. Rerun with "
                 "--detect-anomaly")))
      << output_;
  const int64_t stop_step = std::stoll(stop[1]);
  EXPECT_GT(stop_step, 2);
  EXPECT_EQ(stop[5], path("lr/last.safetensors"));
  EXPECT_EQ(checkpoint_steps(path("lr/last.safetensors")), (stop_step - 1) / 2 * 2);  // finite, the last even step

  EXPECT_EQ(diverging("lr_anomaly", {"--detect-anomaly"}), 1);
  std::smatch anomaly_at;
  ASSERT_TRUE(std::regex_search(output_, anomaly_at, std::regex("error: step (\\d+) \\(epoch 1, batch \\d+ of 10\\): "
                                                                "detect_anomaly: .*module '(conv1|conv2|fc1|fc2|fc3)' "
                                                                "\\((Conv2d|Linear)\\)")))
      << output_;
  // The checks see the first NaN/Inf, in a forward or backward pass, no later than the loss or
  // the weights show it.
  EXPECT_LE(std::stoll(anomaly_at[1]), stop_step);
}
