// qflow-train end to end on a small slice of Debian's Fashion-MNIST: a run split by
// --stop-after/--resume, or by Ctrl-C in the middle of an epoch and --resume, ends with
// exactly the weights of an uninterrupted run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <tuple>
#include <utility>

#include "qflow/core/device_runtime.h"
#include "qflow/qflow.h"
#include "watchdog.h"

using namespace qflow;
using ::testing::HasSubstr;

namespace {

const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

std::string train_command(const std::string& dir, int64_t epochs, const std::string& extra) {
  return std::string(QFLOW_BIN_DIR) + "/qflow-train --model lenet5 --dataset fashion-mnist --subset 384 --test-subset 128 " +
         "--epochs " + std::to_string(epochs) + " --batch-size 64 --lr 0.05 --workers 1 --threads 1 --checkpoint-dir " + dir +
         " " + extra;
}

// The wait status (0 for success), the output in DIR.out; a run that hangs is killed and the
// test says so (tests/watchdog.h).
int run_train(const std::string& dir, const std::string& extra, int64_t epochs = 2) {
  return testing_util::run_watched(train_command(dir, epochs, extra), dir + ".out");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The model and optimizer tensors of two training checkpoints are bitwise equal.
void expect_same_training_state(const std::string& a_file, const std::string& b_file) {
  const nn::StateDict a = nn::load(a_file);
  const nn::StateDict b = nn::load(b_file);
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [key, t] : a) {
    if (key.rfind("model.", 0) != 0 && key.rfind("optimizer.", 0) != 0) continue;
    EXPECT_EQ(to_vector<double>(t), to_vector<double>(b.at(key))) << key;
  }
}

// Pixels of curves.png in exactly the colour `rgb` (the plot draws its series in flat colours)
// below the legends, which write the series names in the same colours: the first 30 rows of
// each 360-row panel.
int64_t plotted_pixels(const std::string& png, std::array<uint8_t, 3> rgb) {
  const Tensor image = data::read_png(png);
  const int64_t h = image.sizes()[1], w = image.sizes()[2], plane = h * w;
  const std::vector<uint8_t> px = to_vector<uint8_t>(image);
  int64_t n = 0;
  for (int64_t i = 0; i < plane; ++i)
    n += (i / w) % 360 >= 30 && px[static_cast<size_t>(i)] == rgb[0] && px[static_cast<size_t>(plane + i)] == rgb[1] &&
         px[static_cast<size_t>(2 * plane + i)] == rgb[2];
  return n;
}

constexpr std::array<uint8_t, 3> kTrainColour = {31, 119, 180}, kTestColour = {230, 110, 0};

std::string temp_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string("qflow_train_") + name + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d.string();
}

}  // namespace

TEST(TrainCliTest, StopAndResumeEndsBitIdenticalToAStraightRun) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string straight = temp_dir("straight"), split = temp_dir("split");
  ASSERT_EQ(run_train(straight, ""), 0);
  ASSERT_EQ(run_train(split, "--stop-after 1"), 0);
  ASSERT_EQ(run_train(split, "--resume"), 0);
  expect_same_training_state(straight + "/last.safetensors", split + "/last.safetensors");
  // Both logs describe two epochs; the per-step log of the split run is the straight run's.
  for (const auto& dir : {straight, split}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/curves.png"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/best.safetensors"));
  }
  EXPECT_EQ(read_text(split + "/steps.csv"), read_text(straight + "/steps.csv"));
  for (const auto& dir : {straight, split}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

TEST(TrainCliTest, FusedTrainingEndsBitIdenticalToTheEagerModel) {
  // Float training runs the model traced and fused (fx::fuse_activations); --no-fuse runs it as
  // written. LeNet5's conv+ReLU (a oneDNN post-op) and in-place ReLUs change no bit.
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string fused = temp_dir("fused"), eager = temp_dir("eager");
  ASSERT_EQ(run_train(fused, "", 1), 0);
  ASSERT_EQ(run_train(eager, "--no-fuse", 1), 0);
  expect_same_training_state(fused + "/last.safetensors", eager + "/last.safetensors");
  // One epoch still draws curves: the 6 steps' training loss and accuracy as lines, the test
  // result as a 7x7 marker, in both panels.
  const std::string steps = read_text(fused + "/steps.csv");
  EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), 7) << steps;  // header + 6 steps
  EXPECT_THAT(steps, ::testing::StartsWith("step,epoch,train_loss,train_acc\n1,1,"));
  const Tensor png = data::read_png(fused + "/curves.png");
  EXPECT_EQ(png.sizes(), (std::vector<int64_t>{3, 720, 960}));
  EXPECT_GT(plotted_pixels(fused + "/curves.png", kTrainColour), 2 * 1000);  // two lines across ~880 px
  EXPECT_GE(plotted_pixels(fused + "/curves.png", kTestColour), 2 * 49);
  for (const auto& dir : {fused, eager}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

// --data-on-device on with --device cpu runs data::DeviceDataLoader on the CPU: the training
// set read once and augmented by random_crop_flip_normalize. Its batches are DataLoader's bit
// for bit (Note [Data on the device]), so the run ends in the same state as the default one.
TEST(TrainCliTest, DataOnTheDeviceTrainsBitIdenticallyToTheCpuLoader) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string loader = temp_dir("cpu_loader"), resident = temp_dir("resident");
  ASSERT_EQ(run_train(loader, "--data-on-device off", 1), 0);
  ASSERT_EQ(run_train(resident, "--data-on-device on", 1), 0);
  expect_same_training_state(loader + "/last.safetensors", resident + "/last.safetensors");
  EXPECT_EQ(read_text(loader + "/steps.csv"), read_text(resident + "/steps.csv"));
  for (const auto& dir : {loader, resident}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

TEST(TrainCliTest, CtrlCMidEpochSavesExitsCleanlyAndResumeContinuesBitIdentically) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_dir("sigint"), straight = temp_dir("sigint_straight");
  std::filesystem::create_directories(dir);
  // Many epochs of 6 batches, so SIGINT lands in the middle of training whenever it arrives.
  const std::string log = dir + "/interrupted.txt";
  testing_util::ChildProcess train = testing_util::ChildProcess::shell("exec " + train_command(dir, 40, ""), log);
  ASSERT_TRUE(train.started());
  // Signal once the first progress line shows (the handler is installed before training).
  ASSERT_TRUE(train.wait_until([&] { return read_text(log).find("epoch 1/40") != std::string::npos; },
                               "the first progress line",
                               std::chrono::milliseconds(5)))
      << "qflow-train ended before training:\n" << read_text(log);
  ASSERT_EQ(kill(train.pid(), SIGINT), 0);
  const int status = train.wait("qflow-train to exit after SIGINT");
  const std::string interrupted = read_text(log);
  ASSERT_TRUE(WIFEXITED(status)) << interrupted;
  EXPECT_EQ(WEXITSTATUS(status), 130) << interrupted;
  EXPECT_THAT(interrupted, ::testing::HasSubstr("qflow-train: interrupted; state saved to " + dir +
                                                "/last.safetensors (continue with --resume)"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/last.safetensors"));

  // --resume finishes the interrupted epoch from the next batch, then stops there.
  ASSERT_EQ(run_train(dir, "--resume --stop-after 1", 40), 0);  // stop-after counts completed epochs
  const std::string resumed = read_text(dir + ".out");
  std::smatch at;
  ASSERT_TRUE(std::regex_search(resumed, at, std::regex("resuming at epoch (\\d+) batch (\\d+)"))) << resumed;
  const int64_t epoch = std::stoll(at[1]), batch = std::stoll(at[2]);
  EXPECT_GE(batch, 1);  // saved after a batch, never before the first
  EXPECT_LE(batch, 6);
  EXPECT_THAT(resumed, ::testing::HasSubstr(fmt::format("stopping after epoch {}", epoch)));
  // The resumed epoch's progress starts at the batch it resumed from, timed from the resume:
  // no lines for batches an earlier run trained, no 0 img/s from counting them.
  const std::regex progress("epoch \\d+/\\d+ +(\\d+)/\\d+ \\[");
  for (auto it = std::sregex_iterator(resumed.begin(), resumed.end(), progress); it != std::sregex_iterator(); ++it)
    EXPECT_GT(std::stoll((*it)[1]), batch) << resumed;
  EXPECT_THAT(resumed, ::testing::Not(::testing::HasSubstr(" 0 img/s"))) << resumed;
  // Its log row's images/s counts only the images this run trained (6 - batch batches of 64) in
  // this run's seconds; the bound is what the CSV's rounding (1 and 2 decimals) allows.
  std::smatch row;
  const std::string csv = read_text(dir + "/log.csv");
  // One fmt::format, not "\n" + std::to_string(...) + ...: GCC 12 warns falsely (-Wrestrict) on the latter.
  const std::string pattern = fmt::format("\n{},(?:[^,]*,){{5}}([^,]+),([^,\n]+)", epoch);
  ASSERT_TRUE(std::regex_search(csv, row, std::regex(pattern))) << csv;
  const double images_per_s = std::stod(row[1]), seconds = std::stod(row[2]);
  EXPECT_NEAR(images_per_s * seconds, static_cast<double>((6 - batch) * 64), 0.05 * seconds + 0.005 * images_per_s + 1e-9)
      << csv;
  // An uninterrupted run of the same epochs ends with the same weights and optimizer state.
  ASSERT_EQ(run_train(straight, "--stop-after " + std::to_string(epoch), 40), 0);
  expect_same_training_state(straight + "/last.safetensors", dir + "/last.safetensors");
  // steps.csv was written with the checkpoint Ctrl-C saved: the resumed run's is the straight run's.
  EXPECT_EQ(read_text(dir + "/steps.csv"), read_text(straight + "/steps.csv"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(straight);
  std::filesystem::remove(dir + ".out");
  std::filesystem::remove(straight + ".out");
}

namespace {

// qflow-train ARGS with stdout and stderr in DIR/out.txt: the exit status and the text.
std::pair<int, std::string> run_flags(const std::string& dir, const std::string& args) {
  std::filesystem::create_directories(dir);
  const int status = testing_util::run_watched(std::string(QFLOW_BIN_DIR) + "/qflow-train " + args, dir + "/out.txt");
  return {status, read_text(dir + "/out.txt")};
}

}  // namespace

TEST(TrainCliTest, BadFlagsGiveAClearErrorAndNonZeroStatus) {
  const std::string dir = temp_dir("bad");
  auto [status, out] = run_flags(dir, "--model resnet19 --dataset fashion-mnist");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("unknown model 'resnet19' (known: alexnet, lenet5, mobilenet_v2, resnet18, resnet34, resnet50)"));
  // Not CLI11's "Value 0 not in range 0.000000 to 1797...368.000000".
  std::tie(status, out) = run_flags(dir, "--epochs 0");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--epochs: must be a positive number, got '0'"));
  std::tie(status, out) = run_flags(dir, "--batch-size 12x");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--batch-size: must be a positive number, got '12x'"));
  std::tie(status, out) = run_flags(dir, "--checkpoint-every -3");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--checkpoint-every: must be zero or a positive number, got '-3'"));
  std::filesystem::remove_all(dir);
}

TEST(TrainCliTest, HelpStatesTheRecipeDefaults) {
  const std::string dir = temp_dir("help");
  const auto [status, out] = run_flags(dir, "--help");
  EXPECT_EQ(status, 0);
  for (const char* option : {"--lr FLOAT=0.1", "--momentum FLOAT=0.9", "--weight-decay FLOAT=0.0005", "--batch-size INT:POSITIVE=128",
                             "--epochs INT:POSITIVE=30", "Random crop + flip on the training set (default: on)"})
    EXPECT_THAT(out, HasSubstr(option));
  std::filesystem::remove_all(dir);
}

// --device (Note [qflow-train --device]): checks that need no GPU.
TEST(TrainCliTest, DeviceFlagRefusesBadFormsAndLetsTheAnalysesRunOnTheGpu) {
  const std::string dir = temp_dir("device");
  auto [status, out] = run_flags(dir, "--device bogus --dataset fashion-mnist");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("unknown device 'bogus': expected 'cpu', 'cuda' or 'cuda:<index>'"));
  std::tie(status, out) = run_flags(dir, "--device cuda:x --dataset fashion-mnist");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("unknown device 'cuda:x'"));
  // --sensitivity and --mixed-precision calibrate and evaluate on the GPU (Note [qflow-train
  // --sensitivity]): nothing refuses them at start. Without a GPU the run stops at the
  // device's reason, as every --device cuda run does; with one it gets past the device to the
  // data set, which is missing.
  for (const char* analysis : {"--sensitivity", "--mixed-precision 1"}) {
    SCOPED_TRACE(analysis);
    std::tie(status, out) = run_flags(dir, std::string("--device cuda ") + analysis + " --dataset fashion-mnist --data " +
                                               dir + "/no-such-data --checkpoint-dir " + dir + "/run");
    EXPECT_NE(status, 0);
    EXPECT_THAT(out, ::testing::Not(HasSubstr("runs on the CPU only")));
    EXPECT_TRUE(out.find("qflow-train: error: cuda:0: ") != std::string::npos ||
                out.find("no-such-data") != std::string::npos)
        << out;
  }
  std::filesystem::remove_all(dir);
}

// --cuda-graphs (Note [qflow-train --cuda-graphs]): "on" insists, so what rules graphs out is
// refused at start, before any data is read.
TEST(TrainCliTest, CudaGraphsOnIsRefusedWhereGraphsCannotRun) {
  const std::string dir = temp_dir("graphs");
  auto [status, out] = run_flags(dir, "--cuda-graphs on --dataset fashion-mnist --checkpoint-dir " + dir + "/run");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--cuda-graphs on replays training steps as CUDA graphs: it needs --device cuda, one "
                             "process and no --detect-anomaly (asked for --device cpu)"));
  std::tie(status, out) = run_flags(dir, "--cuda-graphs sometimes --dataset fashion-mnist");
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--cuda-graphs"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run"));
  std::filesystem::remove_all(dir);
}

TEST(TrainCliTest, DeviceCudaWithoutAGpuStopsAtStartWithTheReason) {
  if (device_count(DeviceType::CUDA) > 0) GTEST_SKIP() << "this machine has a GPU";
  const std::string dir = temp_dir("nogpu");
  // No data set is read: the device is checked first.
  const auto [status, out] = run_flags(dir, "--device cuda --dataset fashion-mnist --data " + dir +
                                                "/no-such-data --epochs 1 --checkpoint-dir " + dir + "/run");
  EXPECT_NE(status, 0);
  // A build without the CUDA backend, or one with it on a machine without a GPU or driver.
  const bool no_backend = out.find("built without its CUDA backend") != std::string::npos;
  const bool no_gpu = out.find("no usable CUDA device on this machine") != std::string::npos;
  // (This test binary may see no GPU where qflow-train does: then the run gets past the check.)
  if (!no_backend && !no_gpu && out.find("no-such-data") != std::string::npos) GTEST_SKIP() << "qflow-train found a GPU";
  EXPECT_TRUE(no_backend || no_gpu) << out;
  EXPECT_THAT(out, HasSubstr("qflow-train: error: cuda:0: "));
  EXPECT_FALSE(std::filesystem::exists(dir + "/run"));
  std::filesystem::remove_all(dir);
}

namespace {

// Column `name` of every row of a CSV file with a header line.
std::vector<std::string> csv_column(const std::string& path, const std::string& name) {
  std::stringstream text(read_text(path));
  std::string line;
  std::getline(text, line);
  std::vector<std::string> header;
  std::stringstream h(line);
  for (std::string cell; std::getline(h, cell, ',');) header.push_back(cell);
  const size_t at = static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  EXPECT_LT(at, header.size()) << path << " has no column " << name << ": " << line;
  std::vector<std::string> column;
  while (std::getline(text, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    column.push_back(at < cells.size() ? cells[at] : std::string());
  }
  return column;
}

// sensitivity.csv (rank,path,type,"qconfig",metric,drop; the quoted QConfig may hold commas):
// each layer's accuracy with it alone quantized.
std::map<std::string, double> sensitivity_by_layer(const std::string& path) {
  std::map<std::string, double> metric;
  std::stringstream text(read_text(path));
  std::string line;
  std::getline(text, line);
  EXPECT_EQ(line, "rank,path,type,qconfig,metric,drop");
  while (std::getline(text, line)) {
    const size_t first = line.find(','), second = line.find(',', first + 1);
    const size_t last = line.rfind(','), before_last = line.rfind(',', last - 1);
    metric[line.substr(first + 1, second - first - 1)] = std::stod(line.substr(before_last + 1, last - before_last - 1));
  }
  return metric;
}

}  // namespace

// Checkpoints hold host bytes (nn::save copies device tensors back; Note [qflow-train
// --device]): a run started on the CPU continues on the GPU and then on the CPU again. Its
// first epoch is the straight CPU run's, bit for bit; the later ones differ from it only by
// the GPU's float rounding, which moves a 6-step epoch's mean loss far less than 2 %.
TEST(TrainCliTest, ACpuCheckpointResumesOnTheGpuAndBack) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no GPU on this machine";
  const std::string straight = temp_dir("straight_cpu"), moved = temp_dir("moved");
  ASSERT_EQ(run_train(straight, "", 3), 0) << read_text(straight + ".out");
  ASSERT_EQ(run_train(moved, "--stop-after 1", 3), 0) << read_text(moved + ".out");
  ASSERT_EQ(run_train(moved, "--resume --device cuda --stop-after 2", 3), 0) << read_text(moved + ".out");
  std::string out = read_text(moved + ".out");
  EXPECT_THAT(out, HasSubstr("(cuda:0)"));  // the header names the device it trains on
  EXPECT_THAT(out, HasSubstr("qflow-train: resuming at epoch 2 batch 0"));
  ASSERT_EQ(run_train(moved, "--resume", 3), 0) << read_text(moved + ".out");
  out = read_text(moved + ".out");
  EXPECT_THAT(out, HasSubstr("qflow-train: resuming at epoch 3 batch 0"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("(cuda:0)")));
  const std::vector<std::string> want = csv_column(straight + "/log.csv", "train_loss");
  const std::vector<std::string> got = csv_column(moved + "/log.csv", "train_loss");
  ASSERT_EQ(got.size(), 3u) << read_text(moved + "/log.csv");
  ASSERT_EQ(want.size(), 3u) << read_text(straight + "/log.csv");
  EXPECT_EQ(got[0], want[0]);
  for (size_t e = 1; e < 3; ++e) EXPECT_NEAR(std::stod(got[e]), std::stod(want[e]), 0.02 * std::stod(want[e])) << "epoch " << e + 1;
  // The state the CPU ended with loads again: every tensor of the checkpoint is host bytes.
  const nn::StateDict last = nn::load(moved + "/last.safetensors");
  for (const auto& [key, t] : last) EXPECT_TRUE(t.device().is_cpu()) << key;
  for (const auto& dir : {straight, moved}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

// --sensitivity and --mixed-precision on the GPU (Note [qflow-train --sensitivity]) with the
// histogram observer, whose counting is host work (Note [Histogram observers on a device]):
// the same layers as on the CPU, each layer's accuracy within 4 of the 128 test images (the
// GPU's float rounding moves an observed range a little), and a mapping file either way.
TEST(TrainCliTest, SensitivityOnTheGpuMeasuresWhatTheCpuMeasures) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no GPU on this machine";
  const std::string trained = temp_dir("sens_float"), cpu = temp_dir("sens_cpu"), gpu = temp_dir("sens_gpu");
  ASSERT_EQ(run_train(trained, "", 1), 0) << read_text(trained + ".out");
  const std::string analyse = "--qat-from " + trained + "/best.safetensors --bits 4 --activation-bits 8 "
                              "--observer histogram --calib-batches 2 --mixed-precision 2";
  for (const auto& [dir, device] : {std::pair{cpu, "cpu"}, std::pair{gpu, "cuda"}}) {
    const int code = testing_util::exit_code(run_train(dir, analyse + " --device " + device, 1));
    EXPECT_TRUE(code == 0 || code == 2) << device << ":\n" << read_text(dir + ".out");  // 2: the drop was not met
    EXPECT_TRUE(std::filesystem::exists(dir + "/mixed_precision.json")) << device;
  }
  EXPECT_THAT(read_text(gpu + ".out"), HasSubstr("calibrated and evaluated on cuda:0"));
  const std::map<std::string, double> on_cpu = sensitivity_by_layer(cpu + "/sensitivity.csv");
  const std::map<std::string, double> on_gpu = sensitivity_by_layer(gpu + "/sensitivity.csv");
  ASSERT_EQ(on_cpu.size(), 5u) << read_text(cpu + "/sensitivity.csv");  // LeNet-5: 2 convolutions, 3 linear layers
  ASSERT_EQ(on_gpu.size(), on_cpu.size()) << read_text(gpu + "/sensitivity.csv");
  for (const auto& [layer, accuracy] : on_cpu) {
    ASSERT_TRUE(on_gpu.count(layer)) << layer;
    EXPECT_NEAR(on_gpu.at(layer), accuracy, 4 * 100.0 / 128) << layer;
  }
  for (const auto& dir : {trained, cpu, gpu}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

namespace {

// "| lenet5 | QAT    | 8    | affine | google  | yes       | 71.09%   | -   | -   |" → the accuracy
// (7th column) of a results-table row, or -1 when the output has no such row. `stage` is a
// regex ("deploy \\(int8\\)").
double table_accuracy(const std::string& output, const std::string& stage) {
  std::smatch m;
  const std::regex row("\\| lenet5 \\| " + stage + " *\\|(?:[^|\\n]*\\|){4} ([0-9.]+)% *\\|");
  return std::regex_search(output, m, row) ? std::stod(m[1]) : -1.0;
}

bool has_row(const std::string& output, const std::string& cells) { return output.find(cells) != std::string::npos; }

}  // namespace

TEST(TrainCliTest, QatRunResumesBitIdenticallyAndReportsTheDeployModel) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string straight = temp_dir("qat_straight"), split = temp_dir("qat_split");
  const std::string qat = "--qat --scheme affine --qat-momentum 0.9";
  ASSERT_EQ(run_train(straight, qat), 0) << read_text(straight + ".out");
  ASSERT_EQ(run_train(split, qat + " --stop-after 1"), 0);
  ASSERT_EQ(run_train(split, qat + " --resume"), 0);
  expect_same_training_state(straight + "/last.safetensors", split + "/last.safetensors");
  // The checkpoint holds the QAT GraphModule: float weights, observers (no float-only keys).
  const nn::StateDict ckpt = nn::load(split + "/last.safetensors");
  EXPECT_TRUE(ckpt.contains("model.conv1.weight"));
  EXPECT_TRUE(ckpt.contains("model.conv1.input_observer.min_val"));
  EXPECT_TRUE(ckpt.contains("model.fc3.weight_observer.max_val"));
  EXPECT_EQ(ckpt.at("model.conv1.input_observer.num_batches_tracked").item<int64_t>(), 12);  // 2 epochs x 6 batches
  // Both report the same QAT and deploy accuracy and write the same deploy model.
  const std::string out = read_text(straight + ".out"), resumed = read_text(split + ".out");
  EXPECT_THAT(out, ::testing::HasSubstr("quantization_aware_training: QConfig(bits=8, scheme=affine, formula=google, "
                                        "per_layer=true, momentum=0.9, ste=pure)"));
  EXPECT_THAT(out, ::testing::HasSubstr("5 replaced (2 QConv2d, 3 QLinear)"));
  EXPECT_THAT(out, ::testing::HasSubstr("| model  | stage          | bits | scheme | formula | per-layer | accuracy | "
                                        "float simulation | same argmax |\n"));
  EXPECT_TRUE(has_row(out, "| lenet5 | QAT            | 8    | affine | google  | yes       |")) << out;
  // Affine weights have a zero point, which oneDNN's integer kernels refuse: the deploy model
  // runs its float simulation, and its row says so.
  EXPECT_TRUE(has_row(out, "| lenet5 | deploy (float) | 8    | affine | google  | yes       |")) << out;
  // Twelve SGD steps leave LeNet5 near chance here (7.81 % of the 128 test images when this
  // was written), so the figure alone says little. What it must show: the deploy model (BN
  // folded, weights as integers, run as its float simulation) computes what the QAT model
  // computed — its accuracy is the QAT row's, within two images' worth for rounding ties.
  constexpr double kTwoImages = 100.0 * 2 / 128;
  ASSERT_GE(table_accuracy(out, "QAT"), 0.0) << out;  // the row is there
  EXPECT_NEAR(table_accuracy(out, "deploy \\(float\\)"), table_accuracy(out, "QAT"), kTwoImages) << out;
  EXPECT_EQ(table_accuracy(resumed, "QAT"), table_accuracy(out, "QAT"));
  EXPECT_EQ(table_accuracy(resumed, "deploy \\(float\\)"), table_accuracy(out, "deploy \\(float\\)"));
  EXPECT_EQ(to_vector<float>(nn::load(straight + "/deploy.safetensors").at("conv1.weight_scale")),
            to_vector<float>(nn::load(split + "/deploy.safetensors").at("conv1.weight_scale")));
  // Its weights are the integers of their grids (Note [Deployed module layout]): uint8 here.
  const Tensor deployed_weight = nn::load(straight + "/deploy.safetensors").at("conv1.weight");
  EXPECT_EQ(deployed_weight.dtype(), DType::UInt8);
  EXPECT_EQ(to_vector<uint8_t>(deployed_weight),
            to_vector<uint8_t>(nn::load(split + "/deploy.safetensors").at("conv1.weight")));
  EXPECT_THAT(out, ::testing::HasSubstr("deploy model (BN folded, weights as the integers of their grids) saved to"));
  // --eval-only evaluates the best QAT weights and deploys them again.
  ASSERT_EQ(run_train(split, qat + " --eval-only"), 0);
  const std::string evaluated = read_text(split + ".out");
  ASSERT_GE(table_accuracy(evaluated, "QAT"), 0.0) << evaluated;
  EXPECT_NEAR(table_accuracy(evaluated, "deploy \\(float\\)"), table_accuracy(evaluated, "QAT"), kTwoImages) << evaluated;
  // Resuming with other quantization flags is refused.
  EXPECT_NE(run_train(split, "--qat --resume"), 0);
  EXPECT_THAT(read_text(split + ".out"), ::testing::HasSubstr("was trained with quantization 'qat QConfig(bits=8, "
                                                              "scheme=affine"));
  EXPECT_NE(run_train(split, "--resume"), 0);
  EXPECT_THAT(read_text(split + ".out"), ::testing::HasSubstr("but the flags ask for 'none'"));
  for (const auto& dir : {straight, split}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

// Note [Recorded test accuracy]: best.safetensors carries the accuracy its run measured and on
// which test images; QAT from it reuses the figure only for the same test images.
TEST(TrainCliTest, QatFromBestUsesTheRecordedFloatAccuracyOnlyForTheSameTestImages) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string fp = temp_dir("recorded_float"), q = temp_dir("recorded_qat");
  ASSERT_EQ(run_train(fp, "", 1), 0);
  const std::string float_out = read_text(fp + ".out");
  std::smatch best;
  ASSERT_TRUE(std::regex_search(float_out, best, std::regex("best test accuracy ([0-9.]+)%"))) << float_out;
  nn::CheckpointMetadata meta;
  (void)nn::load(fp + "/best.safetensors", &meta);
  EXPECT_EQ(meta["quant"], "none");
  EXPECT_EQ(meta["test_set"], "fashion-mnist (default location): first 128 test images");
  EXPECT_NEAR(std::stod(meta["test_accuracy"]), std::stod(best[1]), 0.005);  // the log prints 2 decimals

  ASSERT_EQ(run_train(q, "--qat-from " + fp + "/best.safetensors", 1), 0) << read_text(q + ".out");
  const std::string same = read_text(q + ".out");
  EXPECT_THAT(same, ::testing::HasSubstr("by the run that evaluated it on the same 128 test images"));
  EXPECT_DOUBLE_EQ(table_accuracy(same, "float"), std::stod(best[1]));

  // Other test images: the float model is evaluated on them.
  std::filesystem::remove_all(q);
  const std::string other = std::regex_replace(train_command(q, 1, "--qat-from " + fp + "/best.safetensors"),
                                               std::regex("--test-subset 128"), "--test-subset 64");
  ASSERT_EQ(testing_util::run_watched(other, q + ".out"), 0) << read_text(q + ".out");
  const std::string measured = read_text(q + ".out");
  EXPECT_THAT(measured, ::testing::Not(::testing::HasSubstr("by the run that evaluated it")));
  EXPECT_THAT(measured, ::testing::HasSubstr("qflow-train: float model: test loss"));
  for (const auto& dir : {fp, q}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}

TEST(TrainCliTest, QatFromAFloatCheckpointWithPtqReportsEveryStage) {
  if (!std::filesystem::exists(kFashion)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string fp = temp_dir("float"), q = temp_dir("qat_from");
  ASSERT_EQ(run_train(fp, "", 1), 0);
  std::smatch best;
  const std::string float_out = read_text(fp + ".out");
  ASSERT_TRUE(std::regex_search(float_out, best, std::regex("best test accuracy ([0-9.]+)%"))) << float_out;
  ASSERT_EQ(run_train(q, "--qat-from " + fp + "/last.safetensors --ptq --calib-batches 2 --per-channel --bits 6 "
                         "--formula cambricon --ste clipped", 1), 0) << read_text(q + ".out");
  const std::string out = read_text(q + ".out");
  // The float row is the checkpoint's own accuracy, measured before QAT starts.
  EXPECT_DOUBLE_EQ(table_accuracy(out, "float"), std::stod(best[1]));
  EXPECT_TRUE(has_row(out, "| lenet5 | float         | 32   | -         | -         | -         |")) << out;
  EXPECT_TRUE(has_row(out, "| lenet5 | QAT           | 6    | symmetric | cambricon | no        |")) << out;
  EXPECT_TRUE(has_row(out, "| lenet5 | deploy (int8) | 6    | symmetric | cambricon | no        |")) << out;
  EXPECT_TRUE(has_row(out, "| lenet5 | PTQ (int8)    | 6    | symmetric | cambricon | no        |")) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("qflow-train: PTQ model calibrated on 2 training batches"));
  // A float run with --ptq reports float and PTQ.
  ASSERT_EQ(run_train(fp, "--eval-only --weights " + fp + "/best.safetensors --ptq"), 0);
  const std::string ptq = read_text(fp + ".out");
  EXPECT_DOUBLE_EQ(table_accuracy(ptq, "float"), std::stod(best[1]));
  EXPECT_TRUE(has_row(ptq, "| lenet5 | PTQ (int8) | 8    | symmetric | google  | yes       |")) << ptq;
  // Invalid combinations are refused before any training.
  EXPECT_NE(run_train(q, "--qat --scheme affine --formula cambricon"), 0);
  EXPECT_THAT(read_text(q + ".out"), ::testing::HasSubstr("cambricon"));
  EXPECT_NE(run_train(q, "--qat-from " + fp + "/best.safetensors --weights " + fp + "/best.safetensors"), 0);
  for (const auto& dir : {fp, q}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}
