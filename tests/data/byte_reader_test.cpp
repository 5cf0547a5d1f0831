// Byte sources: plain files, gzip streams (single, concatenated, corrupt, truncated).
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

class ByteReaderTest : public TempDirTest {};

Bytes pattern(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 31 + i / 251) % 256);
  return b;
}

Bytes read_all(ByteReader& in) {
  Bytes out;
  uint8_t buf[1000];
  while (size_t n = in.read(buf, sizeof(buf))) out.insert(out.end(), buf, buf + n);
  return out;
}

TEST_F(ByteReaderTest, PlainFileReadsBackWithSizeAndPosition) {
  const Bytes data = pattern(5000);
  write_bytes(path("plain.bin"), data);
  auto in = open_file(path("plain.bin"));
  EXPECT_EQ(in->size(), 5000u);
  EXPECT_EQ(in->name(), path("plain.bin"));
  EXPECT_EQ(read_all(*in), data);
  EXPECT_EQ(in->position(), 5000u);
}

TEST_F(ByteReaderTest, GzipFileIsDetectedByMagicAndDecompressed) {
  const Bytes data = pattern(300000);  // more than one input chunk of compressed data
  write_bytes(path("data.bin"), gzip(data));  // no .gz suffix on purpose
  EXPECT_TRUE(is_gzip_file(path("data.bin")));
  auto in = open_file(path("data.bin"));
  EXPECT_FALSE(in->size().has_value());
  EXPECT_EQ(read_all(*in), data);
  EXPECT_EQ(in->position(), data.size());
}

TEST_F(ByteReaderTest, ConcatenatedGzipMembersReadAsOneStream) {
  const Bytes a = pattern(1000), b = text_bytes("second member");
  Bytes file = gzip(a);
  const Bytes gb = gzip(b);
  file.insert(file.end(), gb.begin(), gb.end());
  auto in = GzipReader(std::make_unique<MemoryReader>(file, "two.gz"));
  Bytes expected = a;
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(read_all(in), expected);
}

TEST_F(ByteReaderTest, CorruptGzipStreamNamesFileAndOffset) {
  Bytes file = gzip(pattern(20000));
  for (size_t i = 20; i < 40; ++i) file[i] ^= 0x5a;  // inside the deflate data
  write_bytes(path("corrupt.gz"), file);
  const std::string msg = error_of([&] {
    auto in = open_file(path("corrupt.gz"));
    read_all(*in);
  });
  EXPECT_THAT(msg, HasSubstr(path("corrupt.gz") + ": corrupt gzip stream at compressed offset"));
}

TEST_F(ByteReaderTest, BadGzipChecksumIsCorrupt) {
  Bytes file = gzip(pattern(2000));
  file[file.size() - 8] ^= 1;  // CRC-32 in the trailer
  GzipReader in(std::make_unique<MemoryReader>(file, "crc.gz"));
  const std::string msg = error_of([&] { read_all(in); });
  EXPECT_THAT(msg, HasSubstr("crc.gz: corrupt gzip stream at compressed offset"));
  EXPECT_THAT(msg, HasSubstr("incorrect data check"));
}

TEST_F(ByteReaderTest, TruncatedGzipStreamIsReported) {
  Bytes file = gzip(pattern(20000));
  file.resize(file.size() / 2);
  GzipReader in(std::make_unique<MemoryReader>(file, "half.gz"));
  EXPECT_THAT(error_of([&] { read_all(in); }),
              HasSubstr(fmt::format("half.gz: truncated gzip stream: the compressed data ends at offset {}", file.size())));
}

TEST_F(ByteReaderTest, TrailingGarbageAfterGzipIsCorrupt) {
  Bytes file = gzip(pattern(100));
  const size_t end = file.size();
  file.push_back('x');
  GzipReader in(std::make_unique<MemoryReader>(file, "tail.gz"));
  EXPECT_EQ(error_of([&] { read_all(in); }),
            fmt::format("tail.gz: corrupt gzip stream: trailing garbage at compressed offset {}", end));
}

TEST_F(ByteReaderTest, ReadExactSkipAndExpectEndReportTruncationAndTrailingData) {
  MemoryReader in(Bytes(10, 7), "mem");
  uint8_t buf[8];
  in.read_exact(buf, 4, "head");
  EXPECT_EQ(error_of([&] { in.read_exact(buf, 8, "body"); }),
            "mem: truncated: body at offset 4 needs 8 bytes, only 6 left");
  MemoryReader in2(Bytes(10, 7), "mem2");
  in2.skip(3, "x");
  // expect_end reads the byte it finds (the data is bad either way)
  EXPECT_EQ(error_of([&] { in2.expect_end("the header"); }),
            "mem2: oversized: unexpected trailing data at offset 3 after the header");
  EXPECT_EQ(error_of([&] { in2.skip(100, "payload"); }), "mem2: truncated: payload at offset 4 needs 100 bytes, only 6 left");
}

TEST_F(ByteReaderTest, MissingFileAndDirectoryAreErrors) {
  EXPECT_THAT(error_of([&] { FileReader r(path("nope.bin")); }), HasSubstr(path("nope.bin") + ": cannot open"));
  EXPECT_EQ(error_of([&] { FileReader r(dir_.string()); }), dir_.string() + ": not a regular file");
}

}  // namespace
