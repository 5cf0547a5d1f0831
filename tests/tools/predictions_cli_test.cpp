// qflow-train --eval-only and --predictions: evaluation reads the test split alone, and the
// CSV holds the model's softmax output for every test image (Note [Gathered predictions]).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "data/test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

constexpr int64_t kImages = 40;  // not a multiple of the classes, so every label count differs

// An MNIST directory with the test split only: kImages 28x28 images of seeded noise over a
// per-label pattern, labels i % 10.
void write_mnist_test_split(const std::string& dir) {
  Bytes pixels, labels;
  for (int64_t i = 0; i < kImages; ++i) {
    labels.push_back(static_cast<uint8_t>(i % 10));
    for (int64_t p = 0; p < 28 * 28; ++p)
      pixels.push_back(static_cast<uint8_t>((p * (i % 10 + 3) + i * 37 + (p / 28) * (p % 28)) % 256));
  }
  write_bytes(dir + "/t10k-images-idx3-ubyte", idx_file(3, {kImages, 28, 28}, pixels));
  write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_file(1, {kImages}, labels));
}

nn::ModulePtr seeded_lenet5(uint64_t seed) {
  manual_seed(seed);
  return models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
}

struct CsvTable {
  std::string header;
  std::vector<std::vector<double>> rows;
};

CsvTable read_csv(const std::string& path) {
  const Bytes bytes = read_bytes(path);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  CsvTable t;
  std::getline(in, t.header);
  for (std::string line; std::getline(in, line);) {
    std::vector<double> row;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) row.push_back(std::stod(cell));
    t.rows.push_back(row);
  }
  return t;
}

class PredictionsCliTest : public TempDirTest {
 protected:
  int train(const std::string& args) {
    const std::string log = path("out.txt");
    const int status = std::system((std::string(QFLOW_BIN_DIR) + "/qflow-train --workers 1 --threads 1 " + args + " > " +
                                    log + " 2>&1").c_str());
    const Bytes text = read_bytes(log);
    output_.assign(text.begin(), text.end());
    return status;
  }
  std::string output_;
};

}  // namespace

TEST_F(PredictionsCliTest, EvalOnlyReadsTheTestSplitAloneAndWritesTheModelsOutputs) {
  const std::string mnist = path("mnist");
  write_mnist_test_split(mnist);
  const nn::ModulePtr model = seeded_lenet5(7);
  nn::save(model->state_dict(), path("weights.safetensors"));
  const std::string common = "--model lenet5 --dataset mnist --data " + mnist + " --checkpoint-dir " + path("run");
  // The data set has no training files: training fails on them, evaluation never reads them.
  ASSERT_NE(train(common + " --epochs 1"), 0);
  EXPECT_THAT(output_, HasSubstr("train-images-idx3-ubyte"));
  ASSERT_EQ(train(common + " --eval-only --weights " + path("weights.safetensors") + " --predictions " +
                  path("predictions.csv")), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("no training images read, 40 test images"));
  EXPECT_THAT(output_, HasSubstr(fmt::format("predictions for 40 test images written to {}", path("predictions.csv"))));

  // The model's outputs on the same images, loaded and normalized as qflow-train does.
  auto test = std::make_shared<MNIST>(mnist, /*train=*/false);
  DataLoader loader(test, {.batch_size = kImages,
                           .transform = std::make_shared<Compose>(std::vector<TransformPtr>{
                               std::make_shared<ToTensor>(), std::make_shared<Normalize>(std::vector<double>{0.1307},
                                                                                         std::vector<double>{0.3081})})});
  loader.start_epoch();
  const Batch batch = *loader.next();
  model->eval();
  NoGradGuard no_grad;
  const Tensor logits = (*model)(batch.images);
  const std::vector<double> probs = to_vector<double>(softmax(logits, 1).to(DType::Float64));
  const std::vector<int64_t> predicted = to_vector<int64_t>(logits.argmax(1));

  const CsvTable csv = read_csv(path("predictions.csv"));
  EXPECT_EQ(csv.header, "index,label,predicted,prob_0,prob_1,prob_2,prob_3,prob_4,prob_5,prob_6,prob_7,prob_8,prob_9");
  ASSERT_EQ(csv.rows.size(), static_cast<size_t>(kImages));
  std::set<int64_t> classes_predicted;
  for (int64_t i = 0; i < kImages; ++i) {
    const std::vector<double>& row = csv.rows[static_cast<size_t>(i)];
    ASSERT_EQ(row.size(), 13u) << "row " << i;
    EXPECT_EQ(row[0], static_cast<double>(i));
    EXPECT_EQ(row[1], static_cast<double>(i % 10));
    EXPECT_EQ(row[2], static_cast<double>(predicted[static_cast<size_t>(i)])) << "row " << i;
    classes_predicted.insert(static_cast<int64_t>(row[2]));
    double sum = 0;
    for (int64_t c = 0; c < 10; ++c) {
      // Six significant digits in the file; float32 batches in both runs.
      EXPECT_NEAR(row[static_cast<size_t>(3 + c)], probs[static_cast<size_t>(i * 10 + c)], 2e-6) << "row " << i << " class " << c;
      sum += row[static_cast<size_t>(3 + c)];
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "row " << i;
  }
  // The file's accuracy is the one printed.
  int64_t correct = 0;
  for (const auto& row : csv.rows) correct += row[1] == row[2] ? 1 : 0;
  EXPECT_THAT(output_, HasSubstr(fmt::format("accuracy {:.2f}% (40 images)", 100.0 * static_cast<double>(correct) / kImages)));
}

TEST_F(PredictionsCliTest, PredictionsAfterTrainingAreTheFinalModelsAndRefuseAMissingDirectory) {
  const std::string cifar = path("cifar");
  for (int b = 1; b <= 5; ++b) write_bytes(cifar + "/data_batch_" + std::to_string(b) + ".bin", cifar_batch(6, 6 * (b - 1)));
  write_bytes(cifar + "/test_batch.bin", cifar_batch(20, 100));
  const std::string common = "--model lenet5 --dataset cifar10 --data " + cifar + " --batch-size 10 --checkpoint-dir " + path("run");
  ASSERT_EQ(train(common + " --epochs 2 --predictions " + path("trained.csv")), 0) << output_;
  // The weights the run ended with, evaluated again: the same file, bit for bit.
  ASSERT_EQ(train(common + " --eval-only --weights " + path("run/last.safetensors") + " --predictions " +
                  path("evaluated.csv")), 0) << output_;
  EXPECT_EQ(read_bytes(path("trained.csv")), read_bytes(path("evaluated.csv")));
  EXPECT_EQ(read_csv(path("trained.csv")).rows.size(), 20u);

  EXPECT_NE(train(common + " --epochs 1 --predictions " + path("missing/p.csv")), 0);
  EXPECT_THAT(output_, HasSubstr(fmt::format("--predictions {}: the directory {} does not exist", path("missing/p.csv"),
                                             path("missing"))));
}
