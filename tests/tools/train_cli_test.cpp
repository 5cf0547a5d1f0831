// qflow-train end to end on a small slice of Debian's Fashion-MNIST: a run split by
// --stop-after/--resume ends with exactly the weights of an uninterrupted run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "qflow/qflow.h"

using namespace qflow;

namespace {

const char* kFashion = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

int run_train(const std::string& dir, const std::string& extra) {
  const std::string cmd = std::string(QFLOW_BIN_DIR) +
                          "/qflow-train --model lenet5 --dataset fashion-mnist --subset 384 --test-subset 128 --epochs 2 "
                          "--batch-size 64 --lr 0.05 --workers 1 --threads 1 --checkpoint-dir " +
                          dir + " " + extra + " > " + dir + ".out 2>&1";
  return std::system(cmd.c_str());
}

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
  const nn::StateDict a = nn::load(straight + "/last.safetensors");
  const nn::StateDict b = nn::load(split + "/last.safetensors");
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [key, t] : a) {
    if (key.rfind("model.", 0) != 0 && key.rfind("optimizer.", 0) != 0) continue;
    EXPECT_EQ(to_vector<double>(t), to_vector<double>(b.at(key))) << key;
  }
  // Both logs describe two epochs.
  for (const auto& dir : {straight, split}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/curves.png"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/best.safetensors"));
  }
  std::filesystem::remove_all(straight);
  std::filesystem::remove_all(split);
}

TEST(TrainCliTest, BadFlagsGiveAClearErrorAndNonZeroStatus) {
  const std::string dir = temp_dir("bad");
  std::filesystem::create_directories(dir);
  EXPECT_NE(std::system((std::string(QFLOW_BIN_DIR) + "/qflow-train --model resnet19 --dataset fashion-mnist > " + dir +
                         "/out.txt 2>&1").c_str()), 0);
  std::filesystem::remove_all(dir);
}
