// TarReader: members, long names, pax headers, and every kind of damaged header.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

std::string read_member(TarReader& tar) {
  std::string s(static_cast<size_t>(*tar.member().size()), '\0');
  tar.member().read_exact(s.data(), s.size(), "member");
  return s;
}

TEST(TarNumberTest, ParsesOctalPaddingAndBase256) {
  auto parse = [](const std::string& s) {
    return qflow::data::detail::parse_tar_number(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(parse(std::string("00000000017\0", 12)), 15u);
  EXPECT_EQ(parse(std::string("     17 \0\0\0\0", 12)), 15u);
  EXPECT_EQ(parse(std::string(12, '\0')), 0u);
  EXPECT_EQ(parse("0000000008 "), std::nullopt);  // 8 is no octal digit
  EXPECT_EQ(parse("00001 2"), std::nullopt);      // digits after the terminator
  EXPECT_EQ(parse("12x"), std::nullopt);
  const std::string base256 = std::string("\x80\0\0\0\0\0\0\0\0\x01\x00\x05", 12);
  EXPECT_EQ(parse(base256), 0x10005u);
  EXPECT_EQ(parse(std::string("\xc0\0\0\0\0\0\0\0\0\0\0\x01", 12)), std::nullopt);  // negative
}

TEST(TarReaderTest, ReadsMembersInOrderAndSkipsUnreadData) {
  const Bytes tar = make_tar({{"dir/", {}, '5'},
                              {"dir/a.txt", text_bytes("hello")},
                              {"dir/b.bin", Bytes(1500, 9)},
                              {"dir/c.txt", text_bytes("world!")}});
  MemoryReader in(tar, "t.tar");
  TarReader reader(in);
  auto e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "dir/");
  EXPECT_FALSE(e->is_file());
  e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "dir/a.txt");
  EXPECT_EQ(e->size, 5u);
  EXPECT_EQ(e->header_offset, 512u);
  EXPECT_EQ(read_member(reader), "hello");
  EXPECT_EQ(reader.member().name(), "t.tar:dir/a.txt");
  e = reader.next();  // b.bin: not read, skipped by the next call
  ASSERT_TRUE(e);
  EXPECT_EQ(e->size, 1500u);
  e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "dir/c.txt");
  EXPECT_EQ(e->header_offset, 512u * 7);  // after a.txt (2 blocks) and b.bin (1 + 3 blocks)
  EXPECT_EQ(read_member(reader), "world!");
  EXPECT_FALSE(reader.next());
  EXPECT_FALSE(reader.next());
}

TEST(TarReaderTest, GnuLongNamesAndPaxPathsAreResolved) {
  const std::string long_name = std::string(150, 'x') + "/data.bin";
  std::string pax_record = " path=pax/named.txt\n";
  pax_record = std::to_string(pax_record.size() + 2) + pax_record;
  const Bytes tar = make_tar({{long_name, text_bytes("L")},
                              {"PaxHeaders/x", text_bytes(pax_record), 'x'},
                              {"short-name", text_bytes("P")}});
  MemoryReader in(tar, "long.tar");
  TarReader reader(in);
  auto e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, long_name);
  EXPECT_EQ(read_member(reader), "L");
  e = reader.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "pax/named.txt");
  EXPECT_EQ(read_member(reader), "P");
  EXPECT_FALSE(reader.next());
}

TEST(TarReaderTest, ReadsThroughGzip) {
  const Bytes tar = make_tar({{"a", text_bytes("zipped member")}});
  GzipReader gz(std::make_unique<MemoryReader>(gzip(tar), "a.tar.gz"));
  TarReader reader(gz);
  ASSERT_TRUE(reader.next());
  EXPECT_EQ(read_member(reader), "zipped member");
  EXPECT_FALSE(reader.next());
}

TEST(TarReaderTest, BadChecksumNamesArchiveAndHeaderOffset) {
  Bytes tar = make_tar({{"a", Bytes(600, 1)}, {"b", text_bytes("x")}});
  tar[1024 + 512 + 3] ^= 0x20;  // a byte of b's name; its header starts at 1536
  MemoryReader in(tar, "bad.tar");
  TarReader reader(in);
  ASSERT_TRUE(reader.next());
  EXPECT_THAT(error_of([&] { reader.next(); }),
              HasSubstr("bad.tar: bad tar header at offset 1536: checksum"));
}

TEST(TarReaderTest, NotATarFileFailsTheChecksum) {
  MemoryReader in(Bytes(2048, 'z'), "junk.tar");
  TarReader reader(in);
  EXPECT_THAT(error_of([&] { reader.next(); }),
              HasSubstr("junk.tar: bad tar header at offset 0: malformed checksum field (corrupt archive or not a tar file)"));
}

// Rewrites a header field and fixes the checksum so that only the field is wrong.
Bytes with_field(Bytes tar, size_t at, const std::string& value) {
  std::memcpy(tar.data() + at, value.data(), value.size());
  std::memset(tar.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += tar[i];
  const std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(tar.data() + 148, chk.data(), 6);
  tar[154] = 0;
  return tar;
}

TEST(TarReaderTest, MalformedOctalFieldsAreRejected) {
  const Bytes tar = make_tar({{"a", text_bytes("abc")}});
  MemoryReader in(with_field(tar, 124, "0000000009z"), "size.tar");
  TarReader reader(in);
  EXPECT_EQ(error_of([&] { reader.next(); }), "size.tar: bad tar header at offset 0: malformed size field '0000000009z'");
  MemoryReader in2(with_field(tar, 100, "07a4\0\0\0"), "mode.tar");
  TarReader reader2(in2);
  EXPECT_THAT(error_of([&] { reader2.next(); }), HasSubstr("mode.tar: bad tar header at offset 0: malformed mode field"));
  MemoryReader in3(with_field(tar, 257, "uStAr"), "magic.tar");
  TarReader reader3(in3);
  EXPECT_EQ(error_of([&] { reader3.next(); }), "magic.tar: bad tar header at offset 0: unknown magic 'uStAr'");
}

TEST(TarReaderTest, TruncatedArchiveNamesMember) {
  Bytes tar = make_tar({{"big.bin", Bytes(3000, 4)}});
  tar.resize(512 + 1000);
  MemoryReader in(tar, "cut.tar");
  TarReader reader(in);
  ASSERT_TRUE(reader.next());
  std::vector<uint8_t> buf(3000);
  EXPECT_EQ(error_of([&] { reader.member().read(buf.data(), buf.size()); }),
            "cut.tar:big.bin: truncated archive: the member ends at archive offset 1512 after 1000 of its 3000 bytes");
  MemoryReader half(Bytes(tar.begin(), tar.begin() + 300), "half.tar");
  TarReader reader2(half);
  EXPECT_EQ(error_of([&] { reader2.next(); }), "half.tar: truncated tar header at offset 0 (300 of 512 bytes)");
}

TEST(TarReaderTest, SkippingPastTheEndOfATruncatedArchiveIsAnError) {
  Bytes tar = make_tar({{"big.bin", Bytes(3000, 4)}});
  tar.resize(512 + 1000);
  MemoryReader in(tar, "cut.tar");
  TarReader reader(in);
  ASSERT_TRUE(reader.next());
  EXPECT_THAT(error_of([&] { reader.next(); }), HasSubstr("cut.tar: truncated: tar member data at offset 512"));
}

TEST(TarReaderTest, ImplausiblyLargeLongNameIsRefused) {
  Bytes tar = tar_header("././@LongLink", uint64_t{1} << 30, 'L');
  tar.resize(4096, 0);
  MemoryReader in(tar, "huge.tar");
  TarReader reader(in);
  EXPECT_EQ(error_of([&] { reader.next(); }),
            "huge.tar: bad tar header at offset 0: GNU long name of 1073741824 bytes is implausibly large");
}

}  // namespace
