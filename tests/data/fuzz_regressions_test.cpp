// Inputs the fuzz targets (fuzz/, tools/fuzz) found crashing or misleading a data reader, kept
// under tests/data/regressions/<target>/ and replayed through the reader the target drives.
// Each must now be refused with the qflow::Error that names the file and the problem.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

const fs::path kRegressions = fs::path(QFLOW_SOURCE_DIR) / "tests" / "data" / "regressions";

struct Case {
  const char* target;   // the fuzz target (and folder) that found it
  const char* file;
  const char* message;  // what the error must say after the file's path
};

// What each input was before the fix is in the commit that added it.
const Case kCases[] = {
    // The zero dim made the size check pass, the other dims overflowed the strides (UBSan).
    {"idx", "zero-dim-stride-overflow", ": absurd IDX dims [0, 2181038210, 122]: refusing to allocate"},
    // A 64-byte file whose zTXt chunk declares 1.4 GB: libpng allocated the chunk buffer before
    // reading it (an out-of-memory under the fuzzer's limit). Ancillary chunks qflow does not use
    // are now skipped unread, and the file ends as truncated.
    {"png", "ztxt-declares-1.4GB", ": invalid PNG: libpng: unexpected end of file (truncated PNG)"},
};

class DataFuzzRegressionsTest : public TempDirTest {
 protected:
  // Runs the reader of `target` on `path` the way the fuzz target does.
  void read(const std::string& target, const std::string& path) {
    if (target == "idx") {
      read_idx(path);
    } else if (target == "png") {
      decode_png(read_bytes(path), path);
    } else if (target == "tar" || target == "cifar10-archive") {
      if (target == "cifar10-archive") {
        CIFAR10(path, /*train=*/false);
        CIFAR10(path, /*train=*/true);
        return;
      }
      auto archive = open_file(path);
      TarReader tar(*archive);
      std::vector<uint8_t> buffer(4096);
      while (tar.next())
        while (tar.member().read(buffer.data(), buffer.size()) > 0) {
        }
    } else if (target == "cifar10-batch") {
      for (const char* name : {"test_batch.bin", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                               "data_batch_4.bin", "data_batch_5.bin"})
        fs::copy_file(path, dir_ / name, fs::copy_options::overwrite_existing);
      CIFAR10(dir_.string(), /*train=*/false);
    } else {
      FAIL() << "no reader for fuzz target " << target;
    }
  }
};

TEST_F(DataFuzzRegressionsTest, EveryInputIsRefusedWithAQflowError) {
  for (const Case& c : kCases) {
    const std::string path = (kRegressions / c.target / c.file).string();
    ASSERT_TRUE(fs::exists(path)) << path;
    EXPECT_THAT(error_of([&] { read(c.target, path); }), HasSubstr(path + c.message)) << path;
  }
}

TEST_F(DataFuzzRegressionsTest, EveryFileIsListed) {
  for (const auto& target : fs::directory_iterator(kRegressions))
    for (const auto& file : fs::directory_iterator(target.path())) {
      const std::string t = target.path().filename().string(), f = file.path().filename().string();
      EXPECT_TRUE(std::any_of(std::begin(kCases), std::end(kCases), [&](const Case& c) { return t == c.target && f == c.file; }))
          << "tests/data/regressions/" << t << "/" << f << " is not in kCases";
    }
}

}  // namespace
