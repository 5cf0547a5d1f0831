// benchmarks/reproduce-cifar10 end to end on a generated cifar-10-binary.tar.gz (the official
// archive's layout: cifar-10-batches-bin/ with batches.meta.txt, five training batches not in
// batch order, test_batch.bin): the whole study (warm-up, float + five QAT runs, table) with
// LeNet5 on 256 training and 64 test images for 1 epoch, in one process and under
// `mpirun -np 2`; a study killed after its first run finished resumes to the same table;
// --device cuda reaching every qflow-train command (--dry-run; the whole study where there is a
// GPU); and the errors a user meets first (no archive, a corrupt one).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "data/test_files.h"
#include "qflow/core/device_runtime.h"
#include "watchdog.h"

using namespace qflow;
using namespace qflow::data::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// The published rows as the table prints them (label | published).
const std::vector<std::string> kPublishedRows = {
    "| float | 95.62 % |",
    "| 8-bit QAT symmetric/google per-layer | 95.19 % |",
    "| 8-bit QAT symmetric/google per-channel | 95.24 % |",
    "| 8-bit QAT affine/google per-layer | 95.32 % |",
    "| 8-bit QAT affine/google per-channel | 95.30 % |",
    "| 8-bit QAT symmetric/cambricon per-layer | 95.19 % |",
};

std::string text_of(const std::string& path) {
  const Bytes b = read_bytes(path);
  return {b.begin(), b.end()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::istringstream s(line);
  for (std::string cell; std::getline(s, cell, sep);) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

// table.csv without the columns that time the runs (wall_seconds, images_per_s): what two
// runs of the same study must agree on.
std::string accuracy_columns(const std::string& csv) {
  std::string out;
  for (const std::string& line : lines_of(csv)) {
    std::vector<std::string> c = split(line, ',');
    EXPECT_EQ(c.size(), 12u) << line;
    if (c.size() != 12) continue;
    c.erase(c.begin() + 8, c.begin() + 10);
    for (const std::string& cell : c) out += cell + ",";
    out += "\n";
  }
  return out;
}

class ReproduceCifar10Test : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // Batches of 64 records numbered on from the previous one; the official member order.
    std::vector<TarMember> m{{"cifar-10-batches-bin/batches.meta.txt",
                              text_bytes("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n")}};
    for (int k : {1, 3, 4, 5, 2})
      m.push_back({fmt::format("cifar-10-batches-bin/data_batch_{}.bin", k), cifar_batch(64, 64 * (k - 1))});
    m.push_back({"cifar-10-batches-bin/test_batch.bin", cifar_batch(64, 7)});
    archive_ = path("cifar-10-binary.tar.gz");
    write_bytes(archive_, gzip(make_tar(m)));
  }

  // The study's command: LeNet5, 1 epoch of 256 images (2 global batches), 64 test images,
  // 1-batch warm-ups, one thread per process.
  std::string command(const std::string& out, const std::string& extra = "") const {
    return std::string(QFLOW_SOURCE_DIR) + "/benchmarks/reproduce-cifar10 --data " + archive_ + " --out " + out +
           " --qflow-train " + QFLOW_BIN_DIR + "/qflow-train --epochs 1 --model lenet5 --subset 256 --test-subset 64 "
           "--warmup-steps 1 --threads 1 " + extra;
  }

  /// Runs the study; returns its exit status, its output in output_.
  int study(const std::string& out, const std::string& extra = "") {
    const std::string log = out + ".txt";
    const int status = testing_util::run_watched(command(out, extra), log);  // tests/watchdog.h
    output_ = text_of(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // table.md has the six published rows, each with qflow's figures; table.csv one line per row,
  // each trained by `processes` processes on `device`.
  void expect_complete_table(const std::string& out, const std::string& processes, const std::string& device = "cpu") {
    const std::string md = text_of(out + "/table.md");
    for (const std::string& row : kPublishedRows) EXPECT_THAT(md, HasSubstr(row)) << md;
    EXPECT_THAT(output_, HasSubstr(md));  // printed as written
    const std::vector<std::string> csv = lines_of(text_of(out + "/table.csv"));
    ASSERT_EQ(csv.size(), 7u);
    EXPECT_EQ(csv[0],
              "run,published_accuracy,qflow_accuracy,difference,deploy_accuracy,deploy_stage,test_images,epochs,"
              "wall_seconds,images_per_s,processes,device");
    for (size_t i = 1; i < csv.size(); ++i) {
      const std::vector<std::string> c = split(csv[i], ',');
      ASSERT_EQ(c.size(), 12u) << csv[i];
      EXPECT_FALSE(c[2].empty()) << "no qflow accuracy: " << csv[i];
      EXPECT_NEAR(std::stod(c[3]), std::stod(c[2]) - std::stod(c[1]), 0.006) << csv[i];
      EXPECT_EQ(c[4].empty(), i == 1) << "deploy accuracy for the QAT rows only: " << csv[i];
      EXPECT_EQ(c[6], "64") << csv[i];
      EXPECT_EQ(c[7], "1") << csv[i];
      EXPECT_GT(std::stod(c[9]), 0) << csv[i];
      EXPECT_EQ(c[10], processes) << csv[i];
      EXPECT_EQ(c[11], device) << csv[i];
    }
  }

  std::string archive_, output_;
};

TEST_F(ReproduceCifar10Test, OneProcessTrainsTheWholeStudyAndWritesTheTable) {
  const std::string out = path("study"), page = path("results/cifar10.md");
  ASSERT_EQ(study(out, "--page " + page), 0) << output_;
  // --page: the table as a docs/results page, with the date, the machine and the command that
  // regenerates it (benchmarks/results_page.py).
  const std::string written = text_of(page);
  EXPECT_THAT(written, HasSubstr("# The published ResNet18 / CIFAR-10 table and qflow's ("));
  EXPECT_THAT(written, HasSubstr("- **Machine:** "));
  EXPECT_THAT(written, HasSubstr("- **Command:** `benchmarks/reproduce-cifar10 --data "));
  EXPECT_THAT(written, HasSubstr("--page " + page + "`"));
  for (const std::string& row : kPublishedRows) EXPECT_THAT(written, HasSubstr(row));
  EXPECT_THAT(output_, HasSubstr("global batch 128 = 1 process x 128"));
  EXPECT_THAT(output_, HasSubstr("estimate on this machine with 1 process: float run"));
  EXPECT_THAT(output_, HasSubstr("machines | float run | each QAT run | remaining study"));
  expect_complete_table(out, "1");
  // The QAT rows come from qflow-train's own results.csv, the float row from its log.csv.
  EXPECT_TRUE(fs::exists(out + "/symmetric-cambricon-per-layer/results.csv"));
  EXPECT_TRUE(fs::exists(out + "/symmetric-cambricon-per-layer/deploy.safetensors"));

  // Everything done: a second call trains nothing and writes the same table.
  const std::string csv = text_of(out + "/table.csv");
  ASSERT_EQ(study(out), 0) << output_;
  EXPECT_THAT(output_, Not(HasSubstr("warm-up")));
  EXPECT_THAT(output_, Not(HasSubstr("qflow-train:")));
  EXPECT_EQ(text_of(out + "/table.csv"), csv);
}

TEST_F(ReproduceCifar10Test, TwoProcessesUnderMpirunKeepTheGlobalBatch) {
  if (std::system("command -v mpirun > /dev/null") != 0) GTEST_SKIP() << "mpirun is not installed";
  const std::string out = path("study");
  ASSERT_EQ(study(out, "--np 2"), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("global batch 128 = 2 processes x 64 (mpirun -np 2"));
  EXPECT_THAT(output_, HasSubstr("data-parallel on 2 processes"));  // qflow-train's own header
  EXPECT_THAT(output_, HasSubstr("estimate on this machine with 2 processes"));
  expect_complete_table(out, "2");
}

TEST_F(ReproduceCifar10Test, AStudyKilledAfterItsFirstRunResumesToTheSameTable) {
  const std::string straight = path("straight"), killed = path("killed");
  ASSERT_EQ(study(straight), 0) << output_;

  // The study in its own process group, killed with everything it started (as a machine that
  // goes down) once the float run has finished.
  testing_util::ChildProcess first = testing_util::ChildProcess::shell(command(killed), killed + ".first.txt");
  ASSERT_TRUE(first.started());
  const bool float_done = first.wait_until(
      [&] { return text_of(killed + "/float/study.json").find("\"done\": true") != std::string::npos; },
      "the study's float run to finish");
  first.kill_group();
  ASSERT_TRUE(float_done) << (first.hung() ? "" : "the study ended without finishing its float run:\n")
                          << text_of(killed + ".first.txt");
  EXPECT_FALSE(fs::exists(killed + "/table.csv")) << "killed after the whole study: " << text_of(killed + ".first.txt");

  ASSERT_EQ(study(killed), 0) << output_;
  EXPECT_THAT(output_, testing::ContainsRegex("float +1 epoch +finished"));
  expect_complete_table(killed, "1");
  EXPECT_EQ(accuracy_columns(text_of(killed + "/table.csv")), accuracy_columns(text_of(straight + "/table.csv")));
}

// --device cuda goes to every qflow-train the study runs, the warm-ups included (so the
// estimate is the GPU's rate): --dry-run prints the commands and runs none, so this needs no
// GPU. A GPU trains in one process, so --np is refused, and a device name is checked.
TEST_F(ReproduceCifar10Test, DeviceCudaReachesEveryQflowTrainCommand) {
  const std::string out = path("planned");
  ASSERT_EQ(study(out, "--device cuda --dry-run"), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("global batch 128 = 1 process x 128, on cuda, into"));
  int commands = 0;
  for (const std::string& line : lines_of(output_)) {
    if (line.rfind("  $ ", 0) != 0) continue;
    ++commands;
    EXPECT_THAT(line, HasSubstr("/qflow-train "));
    EXPECT_THAT(line, HasSubstr(" --device cuda")) << line;
  }
  EXPECT_EQ(commands, 2 + 6) << output_;  // the float and QAT warm-ups, the six runs
  EXPECT_THAT(output_, HasSubstr("warm-up qat:\n  $ "));
  EXPECT_FALSE(fs::exists(out + "/warmup")) << "a dry run ran a warm-up";
  EXPECT_FALSE(fs::exists(out + "/float")) << "a dry run trained";
  // Without --device the commands are the CPU's as before: qflow-train's default.
  ASSERT_EQ(study(out, "--dry-run"), 0) << output_;
  EXPECT_THAT(output_, Not(HasSubstr("--device")));

  EXPECT_EQ(study(path("x"), "--device cuda --np 2"), 2);
  EXPECT_THAT(output_, HasSubstr("--device cuda trains in one process"));
  EXPECT_EQ(study(path("x"), "--device gpu"), 2);
  EXPECT_THAT(output_, HasSubstr("--device gpu: expected cpu, cuda or cuda:N"));
}

// The whole study on a GPU, where there is one: the table says which device trained each row.
TEST_F(ReproduceCifar10Test, OneGpuTrainsTheWholeStudy) {
  if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no GPU on this machine";
  const std::string out = path("study");
  ASSERT_EQ(study(out, "--device cuda"), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("estimate on this machine's GPU (cuda): float run"));
  expect_complete_table(out, "1", "cuda");
}

TEST_F(ReproduceCifar10Test, MissingAndCorruptArchivesAreNamed) {
  const std::string missing = path("nowhere.tar.gz");
  const int status = std::system((std::string(QFLOW_SOURCE_DIR) + "/benchmarks/reproduce-cifar10 --data " + missing +
                                  " --out " + path("x") + " > " + path("missing.txt") + " 2>&1")
                                     .c_str());
  EXPECT_NE(status, 0);
  EXPECT_THAT(text_of(path("missing.txt")), HasSubstr("--data " + missing + ": no such file or directory"));

  // A download cut short: qflow-train's loader names the archive, and the study shows it.
  Bytes gz = read_bytes(archive_);
  gz.resize(gz.size() * 2 / 3);
  write_bytes(archive_, gz);
  EXPECT_NE(study(path("truncated")), 0);
  EXPECT_THAT(output_, HasSubstr("the warm-up of float failed"));
  EXPECT_THAT(output_, HasSubstr(archive_ + ": truncated gzip stream"));
}

}  // namespace
