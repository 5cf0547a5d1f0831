// IDX files and the MNIST family: plain and gzip, header validation, Debian's Fashion-MNIST.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

class MnistTest : public TempDirTest {
 protected:
  static Bytes images(uint32_t n, uint32_t h = 28, uint32_t w = 28) {
    Bytes px(size_t{n} * h * w);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 3 % 256);
    return idx_file(3, {n, h, w}, px);
  }
  static Bytes labels(uint32_t n) {
    Bytes l(n);
    for (uint32_t i = 0; i < n; ++i) l[i] = static_cast<uint8_t>((i * 7) % 10);
    return idx_file(1, {n}, l);
  }
  void write_split(const std::string& dir, const std::string& prefix, uint32_t n, bool gz) {
    const std::string ext = gz ? ".gz" : "";
    write_bytes((fs::path(dir) / (prefix + "-images-idx3-ubyte" + ext)).string(), gz ? gzip(images(n)) : images(n));
    write_bytes((fs::path(dir) / (prefix + "-labels-idx1-ubyte" + ext)).string(), gz ? gzip(labels(n)) : labels(n));
  }
};

TEST_F(MnistTest, ReadIdxGivesTheFileShapeAndBytes) {
  write_bytes(path("a.idx"), idx_file(2, {2, 3}, {1, 2, 3, 4, 5, 6}));
  const Tensor t = read_idx(path("a.idx"));
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(to_vector<uint8_t>(t), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST_F(MnistTest, ReadsPlainAndGzipSplits) {
  write_split(dir_.string(), "train", 6, false);
  write_split(dir_.string(), "t10k", 4, true);
  MNIST train(dir_.string(), true);
  MNIST test(dir_.string(), false);
  EXPECT_EQ(train.size(), 6);
  EXPECT_EQ(test.size(), 4);
  EXPECT_EQ(test.images_file(), path("t10k-images-idx3-ubyte.gz"));
  const Example ex = train.get(5);
  EXPECT_EQ(ex.label, 5 * 7 % 10);
  EXPECT_EQ(ex.image.sizes(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(ex.image.data_ptr<uint8_t>()[10], static_cast<uint8_t>((5 * 784 + 10) * 3 % 256));
  EXPECT_EQ(test.get(3).image.data_ptr<uint8_t>()[783], static_cast<uint8_t>((4 * 784 - 1) * 3 % 256));
  EXPECT_EQ(train.class_names()[7], "7");
}

TEST_F(MnistTest, FindsTorchvisionRawFolderAndFashionNames) {
  write_split(path("FashionMNIST/raw"), "t10k", 3, true);
  FashionMNIST test(dir_.string(), false);
  EXPECT_EQ(test.size(), 3);
  EXPECT_EQ(test.class_names()[0], "T-shirt/top");
  EXPECT_EQ(test.class_names()[9], "Ankle boot");
  EXPECT_EQ(error_of([&] { test.get(3); }), "FashionMNIST: index 3 out of range for a dataset of 3 samples");
}

TEST_F(MnistTest, MissingFilesAreNamed) {
  EXPECT_EQ(error_of([&] { MNIST(dir_.string(), true); }),
            fmt::format("MNIST: train-images-idx3-ubyte[.gz] not found in {0} (also looked in {0}/MNIST/raw and {0}/raw)",
                        dir_.string()));
}

TEST_F(MnistTest, MagicMismatchIsReported) {
  write_split(dir_.string(), "train", 2, false);
  write_bytes(path("train-images-idx3-ubyte"), labels(2));  // a label file where images belong
  EXPECT_EQ(error_of([&] { MNIST(dir_.string(), true); }),
            path("train-images-idx3-ubyte") + ": IDX magic mismatch: expected 0x00000803, found 0x00000801");
  write_bytes(path("x.idx"), {0x1f, 0x00, 0x08, 0x01, 0, 0, 0, 0});
  EXPECT_EQ(error_of([&] { read_idx(path("x.idx")); }), path("x.idx") + ": not an IDX file: magic 0x1f000801 at offset 0");
  write_bytes(path("y.idx"), {0, 0, 0x0d, 0x01, 0, 0, 0, 0});
  EXPECT_EQ(error_of([&] { read_idx(path("y.idx")); }),
            path("y.idx") + ": IDX element type 0x0d is not supported (only 0x08, unsigned bytes)");
}

TEST_F(MnistTest, TruncatedAndOversizedFilesAreReported) {
  Bytes img = images(3);
  img.resize(img.size() - 10);
  write_bytes(path("t.idx"), img);
  EXPECT_EQ(error_of([&] { read_idx(path("t.idx"), 3); }),
            path("t.idx") + ": truncated: 2358 bytes, but the header's dims [3, 28, 28] need 2368");
  img = images(3);
  img.push_back(0);
  write_bytes(path("o.idx"), img);
  EXPECT_EQ(error_of([&] { read_idx(path("o.idx"), 3); }),
            path("o.idx") + ": oversized: 2369 bytes, but the header's dims [3, 28, 28] need 2368 (1 trailing bytes)");
  img = images(3);
  img.resize(img.size() - 10);
  write_bytes(path("t.idx.gz"), gzip(img));
  EXPECT_THAT(error_of([&] { read_idx(path("t.idx.gz"), 3); }), HasSubstr(path("t.idx.gz") + ": truncated: IDX data"));
  img = images(3);
  img.push_back(0);
  write_bytes(path("o.idx.gz"), gzip(img));
  EXPECT_EQ(error_of([&] { read_idx(path("o.idx.gz"), 3); }),
            path("o.idx.gz") + ": oversized: unexpected trailing data at offset 2368 after the 2352 bytes of IDX data (dims [3, 28, 28])");
  write_bytes(path("h.idx"), {0, 0, 8, 3, 0, 0});
  EXPECT_EQ(error_of([&] { read_idx(path("h.idx")); }),
            path("h.idx") + ": truncated: IDX dims at offset 4 needs 12 bytes, only 2 left");
}

TEST_F(MnistTest, AbsurdDimsAreRefusedBeforeAllocating) {
  write_bytes(path("a.idx.gz"), gzip(idx_file(3, {4000000000u, 28, 28}, {})));
  EXPECT_EQ(error_of([&] { read_idx(path("a.idx.gz"), 3); }),
            path("a.idx.gz") + ": absurd IDX dims [4000000000, 28]: refusing to allocate more than 4294967296 bytes");
  // Empty (a zero dim), but the other dims would overflow the tensor's strides.
  write_bytes(path("z.idx"), idx_file(3, {0, 3000000000u, 3000000000u}, {}));
  EXPECT_EQ(error_of([&] { read_idx(path("z.idx")); }),
            path("z.idx") + ": absurd IDX dims [0, 3000000000, 3000000000]: refusing to allocate more than 4294967296 "
                            "bytes");
  write_bytes(path("e.idx"), idx_file(2, {0, 3000000000u}, {}));
  EXPECT_EQ(read_idx(path("e.idx")).sizes(), (std::vector<int64_t>{0, 3000000000}));
}

TEST_F(MnistTest, CountMismatchAndLabelOutOfRangeAreReported) {
  write_split(dir_.string(), "train", 3, false);
  write_bytes(path("train-labels-idx1-ubyte"), labels(2));
  EXPECT_EQ(error_of([&] { MNIST(dir_.string(), true); }),
            fmt::format("MNIST: 3 images in {} but 2 labels in {}", path("train-images-idx3-ubyte"),
                        path("train-labels-idx1-ubyte")));
  write_bytes(path("train-labels-idx1-ubyte"), idx_file(1, {3}, {1, 2, 12}));
  EXPECT_EQ(error_of([&] { MNIST(dir_.string(), true); }),
            path("train-labels-idx1-ubyte") + ": label 12 out of range [0, 10) at index 2 (offset 10)");
}

TEST_F(MnistTest, CorruptGzipIdxIsReported) {
  Bytes gz = gzip(images(50));
  for (size_t i = 30; i < 60; ++i) gz[i] = 0xff;
  write_bytes(path("c.gz"), gz);
  EXPECT_THAT(error_of([&] { read_idx(path("c.gz")); }), HasSubstr(path("c.gz") + ": corrupt gzip stream at compressed offset"));
}

// Debian's fashion-mnist package, when installed: the real files, end to end.
TEST(FashionMnistDebianTest, ReadsTheInstalledTestSplit) {
  if (!fs::exists(std::string(FashionMNIST::kDebianRoot) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "fashion-mnist is not installed in " << FashionMNIST::kDebianRoot;
  FashionMNIST test(FashionMNIST::kDebianRoot, false);
  ASSERT_EQ(test.size(), 10000);
  std::vector<int64_t> counts(10, 0);
  for (int64_t l : test.labels()) ++counts[static_cast<size_t>(l)];
  EXPECT_EQ(counts, std::vector<int64_t>(10, 1000));
  EXPECT_EQ(test.get(0).label, 9);  // the first test image is an ankle boot
  EXPECT_EQ(test.get(1).label, 2);
}

}  // namespace
