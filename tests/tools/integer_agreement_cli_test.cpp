// Issue 19's acceptance figure, measured the way users measure it: qflow-train trains a small
// model on Debian's Fashion-MNIST, fine-tunes it with QAT and quantizes it post-training, and
// its deploy and PTQ rows (the integer models) are compared with their float simulation on all
// 10,000 test images: ≥ 99.9 % identical argmax, accuracies within 0.05 points.
//
// LeNet5 keeps the test at ~15 s (it trains at ~5,000 images/s on one thread); ResNet18's
// figure on the same 10,000 images is the demo's (docs/results/demo-2026-11-26.md), ~1 minute of evaluation alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using ::testing::HasSubstr;

namespace {

const char* kFashionTest = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
const char* kFashionTrain = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// qflow-train on Fashion-MNIST's LeNet5 with `flags`, output in DIR.out; the exit status.
int train(const std::string& dir, const std::string& flags) {
  const std::string cmd = std::string(QFLOW_BIN_DIR) + "/qflow-train --model lenet5 --dataset fashion-mnist --batch-size 32 " +
                          "--no-augment --threads 1 --workers 1 --checkpoint-dir " + dir + " " + flags + " > " + dir + ".out 2>&1";
  return std::system(cmd.c_str());
}

// results.csv's rows by stage, each a map from column name to cell.
std::map<std::string, std::map<std::string, std::string>> results_by_stage(const std::string& csv) {
  std::istringstream in(csv);
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
  };
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split(line);
  std::map<std::string, std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows[row["stage"]] = row;
  }
  return rows;
}

}  // namespace

TEST(IntegerAgreementCliTest, DeployAndPtqInIntegersAgreeWithTheSimulationOnAllFashionMnistTestImages) {
  if (!std::filesystem::exists(kFashionTest) || !std::filesystem::exists(kFashionTrain))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (tools/setup-deps installs it)";
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string fp = (tmp / ("qflow_agreement_float" + std::to_string(::getpid()))).string();
  const std::string q = (tmp / ("qflow_agreement_qat" + std::to_string(::getpid()))).string();
  // ~85 % float, ~87 % after QAT (measured): trained enough that decisions are not coin flips.
  ASSERT_EQ(train(fp, "--subset 20000 --epochs 2 --lr 0.02"), 0) << read_text(fp + ".out");
  ASSERT_EQ(train(q, "--qat-from " + fp + "/best.safetensors --ptq --subset 4096 --epochs 1 --lr 0.005"), 0)
      << read_text(q + ".out");
  const std::string out = read_text(q + ".out");
  EXPECT_THAT(out, HasSubstr("| model  | stage         | bits | scheme    | formula | per-layer | accuracy | float simulation "
                             "| same argmax |"));
  EXPECT_EQ(read_text(q + "/results.md"), out.substr(out.find("| model ")));  // the printed table, as written
  const auto rows = results_by_stage(read_text(q + "/results.csv"));
  for (const auto& [stage, name] : std::map<std::string, std::string>{{"deploy (int8)", "deploy"}, {"PTQ (int8)", "PTQ"}}) {
    ASSERT_TRUE(rows.count(stage)) << stage << " missing from results.csv:\n" << read_text(q + "/results.csv");
    const auto& row = rows.at(stage);
    EXPECT_EQ(row.at("test_images"), "10000") << stage;
    const double integer = std::stod(row.at("accuracy")), simulated = std::stod(row.at("simulated_accuracy"));
    EXPECT_GE(std::stod(row.at("same_argmax")), 99.9) << stage;
    EXPECT_LE(std::abs(integer - simulated), 0.05) << stage;
    EXPECT_GT(integer, 80.0) << stage;
    EXPECT_THAT(out, HasSubstr("qflow-train: " + name + " in integers: accuracy"));
  }
  EXPECT_EQ(rows.at("QAT").at("simulated_accuracy"), "");  // only deployed models have a simulation
  for (const auto& dir : {fp, q}) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove(dir + ".out");
  }
}
