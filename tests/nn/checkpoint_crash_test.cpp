// Checkpoints under failure: a full disk while saving over a training checkpoint, and a
// writer killed half-way through, both leave the previous checkpoint loadable; the temporary
// file a killed writer leaves is removed by the next save (Note [Interrupted writes]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "nn/test_modules.h"
#include "qflow/nn/checkpoint.h"
#include "watchdog.h"

using namespace qflow;
using namespace qflow::nn;
using nn::testing::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// Defined by tests/fixtures/pause_write.cpp, which interposes write(2) to pause a writer.
extern "C" const int qflow_pause_write_fixture;

namespace {

class CheckpointCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("qflow_checkpoint_crash_{}_{}", ::getpid(), counter_++);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // The names in the directory, sorted.
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }

  fs::path dir_;
  static inline int counter_ = 0;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct TinyRun {
  std::shared_ptr<Sequential> net = std::make_shared<Sequential>(Linear({.in = 8, .out = 16}), ReLU(),
                                                                 Linear({.in = 16, .out = 3}));
  optim::SGD opt{net->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9}};
  optim::StepLR sched{opt, 1, 0.5};
  void step(int64_t s) {
    const Tensor x = arange(0, 32, 1, DType::Float32).view({4, 8}) * (0.01 * static_cast<double>(s + 1));
    opt.zero_grad();
    F::cross_entropy((*net)(x), from_vector<int64_t>({0, 1, 2, 0})).backward();
    opt.step();
    sched.step();
  }
};

// A process id that no longer exists: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_F(CheckpointCrashTest, FullDiskLeavesThePreviousTrainingCheckpointLoadable) {
  const std::string p = path("last.safetensors");
  TinyRun run;
  run.step(0);
  save_training_checkpoint(p, *run.net, run.opt, &run.sched, {.epoch = 0, .step = 1});
  const auto before = read_bytes(p);
  run.step(1);

  // A file-size limit below the checkpoint's size: write() fails with EFBIG part-way through,
  // as it fails with ENOSPC on a full disk.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err =
      error_of([&] { save_training_checkpoint(p, *run.net, run.opt, &run.sched, {.epoch = 0, .step = 2}); });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  // The same state saved without the limit gives the size the failed write wanted.
  save_training_checkpoint(path("unlimited.safetensors"), *run.net, run.opt, &run.sched, {.epoch = 0, .step = 2});
  const auto wanted = fs::file_size(path("unlimited.safetensors"));
  ASSERT_GT(wanted, 1024u);
  EXPECT_EQ(err, fmt::format("save: writing '{}' failed after 1024 of {} bytes: File too large (any previous file at that "
                             "path is unchanged)", p, wanted));
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(entries(), (std::set<std::string>{"last.safetensors", "unlimited.safetensors"}));
  // The previous checkpoint still restores step 1.
  TinyRun fresh;
  EXPECT_EQ(load_training_checkpoint(p, *fresh.net, fresh.opt, &fresh.sched), (TrainingProgress{.epoch = 0, .step = 1}));
}

TEST_F(CheckpointCrashTest, WriterKilledMidWriteLeavesTheOldFileAndTheNextSaveRemovesItsTemporary) {
  const std::string p = path("m.safetensors");
  const StateDict old_state{{"w", full({1000}, 1.0f)}}, new_state{{"w", full({1000}, 2.0f)}};
  save(old_state, p);
  const auto before = read_bytes(p);
  const uint64_t total = to_safetensors_bytes(new_state).size();

  // The fixture tests/fixtures/pause_write.cpp (linked into this binary, so the forked writer
  // has it): the writer sleeps once half of its bytes are in the temporary file — longer than
  // the watchdog waits (tests/watchdog.h), so however slowly it gets there, it is still paused
  // mid-write when seen.
  ASSERT_EQ(qflow_pause_write_fixture, 1);
  const int64_t pause_ms = std::chrono::duration_cast<std::chrono::milliseconds>(testing_util::kHangLimit).count() * 2;
  testing_util::ChildProcess writer([&] {
    ::setenv("QFLOW_PAUSE_WRITE_AT", std::to_string(total / 2).c_str(), 1);
    ::setenv("QFLOW_PAUSE_WRITE_MS", std::to_string(pause_ms).c_str(), 1);
    save(new_state, p);
    return 0;
  });
  ASSERT_TRUE(writer.started());
  const std::string prefix = fmt::format(".m.safetensors.{}.", writer.pid());
  std::string temp;
  const bool mid_write = writer.wait_until(
      [&] {
        for (const std::string& name : entries())
          if (name.starts_with(prefix) && fs::file_size(path(name)) == total / 2) temp = name;
        return !temp.empty();
      },
      "the writer to reach the middle of its write", std::chrono::milliseconds(2));
  ASSERT_TRUE(mid_write) << "the writer ended without pausing in the middle of its write";
  ASSERT_EQ(kill(writer.pid(), SIGKILL), 0);
  const int status = writer.wait("the killed writer to exit");
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  // The target is the old file, whole; only the half-written temporary is new.
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(to_vector<float>(load(p).at("w")), std::vector<float>(1000, 1.0f));
  EXPECT_EQ(entries(), (std::set<std::string>{"m.safetensors", temp}));

  // A program resuming in this directory removes it at start-up.
  EXPECT_EQ(remove_abandoned_temporaries(p), 1);
  EXPECT_EQ(entries(), (std::set<std::string>{"m.safetensors"}));

  // A successful save removes those of dead writers too; temporaries of live processes (this
  // one, its parent) and other names are left alone.
  const std::string dead = fmt::format(".m.safetensors.{}.3.tmp", dead_pid());
  const std::string own = fmt::format(".m.safetensors.{}.999.tmp", ::getpid());
  const std::string parent = fmt::format(".m.safetensors.{}.0.tmp", ::getppid());
  const std::string other = fmt::format(".n.safetensors.{}.0.tmp", dead_pid());
  const std::string odd = ".m.safetensors.backup.tmp";
  for (const std::string& name : {dead, own, parent, other, odd}) std::ofstream(path(name)) << "x";
  save(new_state, p);
  EXPECT_EQ(to_vector<float>(load(p).at("w")), std::vector<float>(1000, 2.0f));
  EXPECT_EQ(entries(), (std::set<std::string>{"m.safetensors", own, parent, other, odd}));
}
