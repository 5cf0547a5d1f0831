// qflow-show-data end to end: the PNG it writes is the labelled grid of the batch asked for,
// read back with data's PNG reader — on Debian's Fashion-MNIST and on generated CIFAR-10 files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "data/test_files.h"
#include "viz/image_grid.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using qflow::viz::make_image_grid;
using ::testing::HasSubstr;

namespace {

const char* kFashionRoot = "/usr/share/datasets/fashion-mnist";

class ShowDataCliTest : public TempDirTest {
 protected:
  /// Runs qflow-show-data with `args`; returns its exit status, output in output_.
  int show(const std::string& args) {
    const std::string log = path("out.txt");
    const int status = std::system((std::string(QFLOW_BIN_DIR) + "/qflow-show-data " + args + " > " + log + " 2>&1").c_str());
    const Bytes text = read_bytes(log);
    output_.assign(text.begin(), text.end());
    return status;
  }
  std::string output_;
};

// The grid's height and width, from make_image_grid's layout: 2-pixel gaps, an 11-pixel label
// band under each image, a 10-pixel legend line per class shown.
std::vector<int64_t> grid_shape(int64_t n, int64_t columns, int64_t cell, int64_t classes_shown) {
  const int64_t cols = std::min(n, columns), rows = (n + cols - 1) / cols;
  return {3, 2 + rows * (cell + 11 + 2) + 2 + 10 * classes_shown, 2 + cols * (cell + 2)};
}

int64_t distinct(const std::vector<int64_t>& labels) { return static_cast<int64_t>(std::set(labels.begin(), labels.end()).size()); }

// The first `n` samples of `d` as one uint8 batch, and their labels.
std::pair<Tensor, Tensor> first_samples(const Dataset& d, int64_t n) {
  std::vector<Tensor> images;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    const Example e = d.get(i);
    images.push_back(e.image);
    labels.push_back(e.label);
  }
  return {stack(images), from_vector<int64_t>(labels, {n})};
}

// data_batch_1..5 with 3 records each (labels 0..14 mod 10 across the split), test_batch with 4.
void write_cifar_dir(const std::string& dir) {
  for (int b = 1; b <= 5; ++b) write_bytes(dir + "/data_batch_" + std::to_string(b) + ".bin", cifar_batch(3, 3 * (b - 1)));
  write_bytes(dir + "/test_batch.bin", cifar_batch(4, 100));
}

// The generated CIFAR-10 training images (N, 3, 32, 32) uint8, built from the record formula.
Tensor cifar_images(int64_t n) {
  std::vector<uint8_t> px;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 1024; ++i) px.push_back(cifar_pixel(r, c, i));
  return from_vector<uint8_t>(px, {n, 3, 32, 32});
}

TEST_F(ShowDataCliTest, FashionMnistTestImagesAreTheLabelledGridOfTheFirstImages) {
  if (!fs::exists(std::string(kFashionRoot) + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ASSERT_EQ(show("--dataset fashion-mnist --test --count 12 --columns 6 --no-shuffle -o " + path("fashion.png")), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("12 test images of fashion-mnist (first of 10000)"));
  const Tensor png = read_png(path("fashion.png"));
  const FashionMNIST test(kFashionRoot, false);
  const auto [images, labels] = first_samples(test, 12);
  // 28-pixel images scaled 3x to 84; two rows of six.
  EXPECT_EQ(png.sizes(), grid_shape(12, 6, 84, distinct(to_vector<int64_t>(labels))));
  // Normalized by the tool and un-normalized for display, the pixels come back as stored.
  EXPECT_EQ(to_vector<uint8_t>(png), to_vector<uint8_t>(make_image_grid(images, labels, test.class_names(), {.columns = 6})));
}

TEST_F(ShowDataCliTest, FashionMnistAugmentedBatchKeepsItsSamplesAndChangesItsPixels) {
  if (!fs::exists(std::string(kFashionRoot) + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  ASSERT_EQ(show("--dataset fashion-mnist --count 16 --seed 5 -o " + path("plain.png")), 0) << output_;
  ASSERT_EQ(show("--dataset fashion-mnist --count 16 --seed 5 --augment -o " + path("augmented.png")), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("16 train images of fashion-mnist (seeded sample of 60000, augmented, seed 5)"));
  // The seeded sample is the loader's first shuffled batch for seed 5 (without a transform the
  // loader scales to [0, 1], which the grid maps back to the stored bytes).
  const auto train = std::make_shared<FashionMNIST>(kFashionRoot, true);
  DataLoader loader(train, {.batch_size = 16, .shuffle = true, .seed = 5});
  const Batch first = *loader.begin();
  const Tensor plain = read_png(path("plain.png")), augmented = read_png(path("augmented.png"));
  EXPECT_EQ(plain.sizes(), grid_shape(16, 8, 84, distinct(to_vector<int64_t>(first.labels))));
  EXPECT_EQ(to_vector<uint8_t>(plain), to_vector<uint8_t>(make_image_grid(first.images, first.labels, train->class_names())));
  EXPECT_EQ(augmented.sizes(), plain.sizes());
  EXPECT_NE(to_vector<uint8_t>(augmented), to_vector<uint8_t>(plain));  // crops and flips moved pixels
}

TEST_F(ShowDataCliTest, GeneratedCifarDirectoryGivesTheGridOfItsImages) {
  write_cifar_dir(path("cifar"));
  ASSERT_EQ(show("--dataset cifar10 --data " + path("cifar") + " --count 15 --columns 5 --no-shuffle -o " + path("c.png")), 0)
      << output_;
  const Tensor png = read_png(path("c.png"));
  // 32-pixel images scaled 2x to 64; three rows of five; all ten classes in the legend.
  EXPECT_EQ(png.sizes(), (std::vector<int64_t>{3, 2 + 3 * (64 + 11 + 2) + 2 + 10 * 10, 2 + 5 * (64 + 2)}));
  std::vector<int64_t> labels;
  for (int64_t r = 0; r < 15; ++r) labels.push_back(r % 10);
  EXPECT_EQ(to_vector<uint8_t>(png), to_vector<uint8_t>(make_image_grid(cifar_images(15), from_vector<int64_t>(labels, {15}),
                                                                         CIFAR10::default_class_names(), {.columns = 5})));
}

TEST_F(ShowDataCliTest, CountIsCappedAtTheSplitSizeAndShufflingKeepsTheSamples) {
  write_cifar_dir(path("cifar"));
  // The test split holds 4 images (labels 0..3): asking for 100 shows those 4, in some order.
  ASSERT_EQ(show("--dataset cifar10 --data " + path("cifar") + " --test --count 100 --seed 7 -o " + path("t.png")), 0) << output_;
  EXPECT_THAT(output_, HasSubstr("4 test images of cifar10 (seeded sample of 4, seed 7)"));
  const Tensor png = read_png(path("t.png"));
  EXPECT_EQ(png.sizes(), grid_shape(4, 8, 64, 4));
}

TEST_F(ShowDataCliTest, HelpListsTheFlagsAndMistakesGiveClearErrors) {
  ASSERT_EQ(show("--help"), 0);
  for (const char* flag : {"--dataset", "--data", "--test", "--count", "--seed", "--augment", "--no-shuffle", "--output"})
    EXPECT_THAT(output_, HasSubstr(flag));
  EXPECT_NE(show("--dataset cifar10 -o " + path("x.png")), 0);
  EXPECT_THAT(output_, HasSubstr("--data DIR is required for cifar10"));
  EXPECT_NE(show("--dataset cifar10 --data " + path("nowhere") + " -o " + path("x.png")), 0);
  EXPECT_THAT(output_, HasSubstr("does not exist"));
  EXPECT_NE(show("--dataset imagenet"), 0);
  EXPECT_THAT(output_, HasSubstr("imagenet"));
  EXPECT_FALSE(fs::exists(path("x.png")));
}

}  // namespace
