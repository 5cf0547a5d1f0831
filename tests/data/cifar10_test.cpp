// CIFAR-10 binary version: directory and tar.gz reading, class names, every malformed input.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

class Cifar10Test : public TempDirTest {
 protected:
  // Five training batches of 3, 2, 4, 1, 2 records (12 in all) and a test batch of 5; batch k
  // continues the record numbering of batch k-1, so record r anywhere has label r % 10.
  static constexpr int64_t kBatchSizes[5] = {3, 2, 4, 1, 2};

  std::vector<TarMember> members(const std::string& folder, bool with_meta) const {
    std::vector<TarMember> m;
    int64_t first = 0;
    std::vector<std::pair<std::string, Bytes>> batches;
    for (int k = 0; k < 5; ++k) {
      batches.push_back({fmt::format("data_batch_{}.bin", k + 1), cifar_batch(kBatchSizes[k], first)});
      first += kBatchSizes[k];
    }
    // The official archive's member order is not 1..5; the reader must not care.
    for (int k : {0, 2, 4, 3, 1}) m.push_back({folder + batches[static_cast<size_t>(k)].first, batches[static_cast<size_t>(k)].second});
    m.push_back({folder + "test_batch.bin", cifar_batch(5, 100)});
    m.push_back({folder + "readme.html", text_bytes("<html></html>")});
    if (with_meta) m.insert(m.begin() + 1, {folder + "batches.meta.txt", text_bytes("a0\nb1\nc2\nd3\ne4\nf5\ng6\nh7\ni8\nj9\n\n")});
    return m;
  }

  void write_directory(const std::string& dir, bool with_meta) const {
    for (const TarMember& m : members("", with_meta)) write_bytes((fs::path(dir) / m.name).string(), m.data);
  }

  // Every sample's label and pixels follow from its record number.
  static void expect_records(const Dataset& ds, int64_t first_record) {
    for (int64_t i = 0; i < ds.size(); ++i) {
      const Example ex = ds.get(i);
      const int64_t r = first_record + i;
      ASSERT_EQ(ex.label, r % 10) << "sample " << i;
      ASSERT_EQ(ex.image.sizes(), (std::vector<int64_t>{3, 32, 32}));
      ASSERT_EQ(ex.image.dtype(), DType::UInt8);
      const uint8_t* p = ex.image.data_ptr<uint8_t>();
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t k : {int64_t{0}, int64_t{33}, int64_t{1023}})
          ASSERT_EQ(p[c * 1024 + k], cifar_pixel(r, c, k)) << "sample " << i << " channel " << c;
    }
  }
};

TEST_F(Cifar10Test, ReadsTrainAndTestBatchesFromADirectory) {
  write_directory(dir_.string(), false);
  CIFAR10 train(dir_.string(), true);
  EXPECT_EQ(train.size(), 12);
  expect_records(train, 0);
  EXPECT_EQ(train.class_names(), CIFAR10::default_class_names());
  EXPECT_EQ(train.class_names()[3], "cat");
  CIFAR10 test(dir_.string(), false);
  EXPECT_EQ(test.size(), 5);
  expect_records(test, 100);
}

TEST_F(Cifar10Test, SamplesAreViewsIntoOneContiguousBuffer) {
  write_directory(dir_.string(), false);
  CIFAR10 train(dir_.string(), true);
  const Tensor a = train.get(0).image, b = train.get(11).image;
  EXPECT_EQ(a.impl()->storage(), b.impl()->storage());
  EXPECT_EQ(static_cast<uint8_t*>(b.raw_data()) - static_cast<uint8_t*>(a.raw_data()), 11 * 3072);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw_data()) % 64, 0u);
}

TEST_F(Cifar10Test, ClassNamesComeFromBatchesMeta) {
  write_directory(dir_.string(), true);
  CIFAR10 train(dir_.string(), true);
  EXPECT_EQ(train.class_names(), (std::vector<std::string>{"a0", "b1", "c2", "d3", "e4", "f5", "g6", "h7", "i8", "j9"}));
}

TEST_F(Cifar10Test, FindsTheArchiveFolderInsideRoot) {
  write_directory(path("cifar-10-batches-bin"), false);
  CIFAR10 test(dir_.string(), false);
  EXPECT_EQ(test.source(), path("cifar-10-batches-bin"));
  expect_records(test, 100);
}

TEST_F(Cifar10Test, ReadsTheTarGzArchiveDirectlyInBatchOrder) {
  write_bytes(path("cifar-10-binary.tar.gz"), gzip(make_tar(members("cifar-10-batches-bin/", true))));
  CIFAR10 train(dir_.string(), true);  // finds the archive in root
  EXPECT_EQ(train.source(), path("cifar-10-binary.tar.gz"));
  EXPECT_EQ(train.size(), 12);
  expect_records(train, 0);
  EXPECT_EQ(train.class_names()[9], "j9");
  CIFAR10 test(path("cifar-10-binary.tar.gz"), false);  // or given the archive itself
  expect_records(test, 100);
  EXPECT_FALSE(fs::exists(path("cifar-10-batches-bin")));  // nothing unpacked
}

TEST_F(Cifar10Test, ReadsAnUncompressedTar) {
  write_bytes(path("c.tar"), make_tar(members("x/", false)));
  CIFAR10 test(path("c.tar"), false);
  expect_records(test, 100);
}

TEST_F(Cifar10Test, WronglySizedFileNamesFileAndRecord) {
  write_directory(dir_.string(), false);
  Bytes b = cifar_batch(2);
  b.resize(b.size() + 100);
  write_bytes(path("data_batch_4.bin"), b);
  EXPECT_EQ(error_of([&] { CIFAR10(dir_.string(), true); }),
            fmt::format("{}: wrongly sized: 6246 bytes is not a whole number of 3073-byte records (record 2 at offset "
                        "6146 is cut short)",
                        path("data_batch_4.bin")));
  write_bytes(path("test_batch.bin"), {});
  EXPECT_EQ(error_of([&] { CIFAR10(dir_.string(), false); }),
            path("test_batch.bin") + ": wrongly sized: the file holds no records");
}

TEST_F(Cifar10Test, LabelOutOfRangeNamesRecordAndOffset) {
  write_directory(dir_.string(), false);
  Bytes b = cifar_batch(4);
  b[3 * 3073] = 10;
  write_bytes(path("test_batch.bin"), b);
  EXPECT_EQ(error_of([&] { CIFAR10(dir_.string(), false); }),
            path("test_batch.bin") + ": label 10 out of range [0, 10) in record 3 (offset 9219)");
}

TEST_F(Cifar10Test, MissingBatchFileIsNamed) {
  write_directory(dir_.string(), false);
  fs::remove(path("data_batch_5.bin"));
  EXPECT_EQ(error_of([&] { CIFAR10(dir_.string(), true); }),
            fmt::format("CIFAR10: data_batch_5.bin is missing from {}", dir_.string()));
  EXPECT_THAT(error_of([&] { CIFAR10(path("empty-dir-that-does-not-exist"), true); }), HasSubstr("does not exist"));
  EXPECT_EQ(error_of([&] { CIFAR10(path("data_batch_1.bin"), true); }),
            fmt::format("CIFAR10: {} is a batch file; pass the directory that holds the batch files",
                        path("data_batch_1.bin")));
  fs::create_directories(path("empty"));
  EXPECT_THAT(error_of([&] { CIFAR10(path("empty"), true); }),
              HasSubstr("CIFAR10: no CIFAR-10 binary data in " + path("empty") + ": expected data_batch_1.bin"));
}

TEST_F(Cifar10Test, ArchiveWithoutAMemberIsNamed) {
  std::vector<TarMember> m = members("d/", false);
  m.erase(std::remove_if(m.begin(), m.end(), [](const TarMember& t) { return t.name == "d/data_batch_3.bin"; }), m.end());
  write_bytes(path("a.tar.gz"), gzip(make_tar(m)));
  EXPECT_EQ(error_of([&] { CIFAR10(path("a.tar.gz"), true); }),
            fmt::format("CIFAR10: {} has no member data_batch_3.bin", path("a.tar.gz")));
}

TEST_F(Cifar10Test, WronglySizedArchiveMemberNamesArchiveAndMember) {
  std::vector<TarMember> m = members("d/", false);
  m.back().name = "d/test_batch.bin";  // replace readme with a second, broken test batch
  m.erase(std::remove_if(m.begin(), m.end() - 1, [](const TarMember& t) { return t.name == "d/test_batch.bin"; }),
          m.end() - 1);
  m.back().data = Bytes(3073 + 5, 1);
  write_bytes(path("a.tar.gz"), gzip(make_tar(m)));
  EXPECT_THAT(error_of([&] { CIFAR10(path("a.tar.gz"), false); }),
              HasSubstr(path("a.tar.gz") + ":d/test_batch.bin: wrongly sized: 3078 bytes"));
}

TEST_F(Cifar10Test, CorruptGzipArchiveIsReported) {
  Bytes gz = gzip(make_tar(members("d/", false)));
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = static_cast<uint8_t>(i * 13);
  write_bytes(path("a.tar.gz"), gz);
  EXPECT_THAT(error_of([&] { CIFAR10(path("a.tar.gz"), true); }),
              HasSubstr(path("a.tar.gz") + ": corrupt gzip stream at compressed offset"));
}

TEST_F(Cifar10Test, TruncatedArchiveIsReported) {
  Bytes gz = gzip(make_tar(members("d/", false)));
  gz.resize(gz.size() * 2 / 3);
  write_bytes(path("a.tar.gz"), gz);
  EXPECT_THAT(error_of([&] { CIFAR10(path("a.tar.gz"), true); }),
              HasSubstr(path("a.tar.gz") + ": truncated gzip stream"));
}

TEST_F(Cifar10Test, MemberClaimingAbsurdSizeIsRefusedBeforeAllocating) {
  // test_batch.bin's header claims 2^27 records (412 GB, GNU base-256 size); one record follows.
  Bytes tar = tar_header("test_batch.bin", 0, '0');
  const uint64_t claimed = uint64_t{3073} << 27;
  std::memset(tar.data() + 124, 0, 12);
  tar[124] = 0x80;
  for (int i = 0; i < 8; ++i) tar[135 - static_cast<size_t>(i)] = static_cast<uint8_t>(claimed >> (8 * i));
  std::memset(tar.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : tar) sum += b;
  const std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(tar.data() + 148, chk.data(), 6);
  tar[154] = 0;
  const Bytes record = cifar_batch(1);
  tar.insert(tar.end(), record.begin(), record.end());
  write_bytes(path("big.tar"), tar);
  EXPECT_EQ(error_of([&] { CIFAR10(path("big.tar"), false); }),
            path("big.tar") + ":test_batch.bin: oversized: 412451078144 bytes would be 134217728 records, more than the "
                              "1000000 a CIFAR-10 batch file may hold");
  // A claim within bounds that the data does not back ends as "truncated".
  Bytes small = tar_header("test_batch.bin", 3073 * 999, '0');
  small.insert(small.end(), record.begin(), record.end());
  write_bytes(path("cut.tar"), small);
  EXPECT_THAT(error_of([&] { CIFAR10(path("cut.tar"), false); }),
              HasSubstr(path("cut.tar") + ":test_batch.bin: truncated archive: the member ends at archive offset 3585"));
}

TEST_F(Cifar10Test, BadTarHeaderInArchiveIsReported) {
  Bytes tar = make_tar(members("d/", false));
  tar[512 + 3 * 3073 + 512 - 3 * 3073 % 512 + 10] ^= 0x11;  // second header (after 3-record batch 1)
  write_bytes(path("a.tar.gz"), gzip(tar));
  EXPECT_THAT(error_of([&] { CIFAR10(path("a.tar.gz"), true); }),
              HasSubstr(path("a.tar.gz") + ": bad tar header at offset 10240: checksum"));
}

TEST_F(Cifar10Test, BadClassNameListIsReported) {
  write_directory(dir_.string(), false);
  write_bytes(path("batches.meta.txt"), text_bytes("only\nthree\nnames\n"));
  EXPECT_EQ(error_of([&] { CIFAR10(dir_.string(), false); }),
            path("batches.meta.txt") + ": expected 10 class names, one per line, found 3");
}

TEST_F(Cifar10Test, IndexOutOfRangeIsAnError) {
  write_directory(dir_.string(), false);
  CIFAR10 test(dir_.string(), false);
  EXPECT_EQ(error_of([&] { test.get(5); }), "CIFAR10: index 5 out of range for a dataset of 5 samples");
  EXPECT_EQ(error_of([&] { test.get(-1); }), "CIFAR10: index -1 out of range for a dataset of 5 samples");
}

}  // namespace
