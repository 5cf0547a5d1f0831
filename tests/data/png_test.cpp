// PNG reading (every colour type, bit depth, interlacing, channel conversions), writing, and
// files libpng rejects.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

class PngTest : public TempDirTest {};

std::vector<uint8_t> pixels(const Tensor& t) { return to_vector<uint8_t>(t); }

TEST_F(PngTest, WriteThenReadRoundTripsEveryChannelCount) {
  for (int64_t c = 1; c <= 4; ++c) {
    std::vector<uint8_t> v(static_cast<size_t>(c * 3 * 5));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 17 % 256);
    const Tensor img = from_vector<uint8_t>(v, {c, 3, 5});
    const std::string p = path(fmt::format("c{}.png", c));
    write_png(p, img);
    const Tensor back = read_png(p);
    EXPECT_EQ(back.sizes(), img.sizes()) << c;
    EXPECT_EQ(pixels(back), v) << c;
  }
  // (H, W) is written as gray.
  write_png(path("hw.png"), from_vector<uint8_t>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(read_png(path("hw.png")).sizes(), (std::vector<int64_t>{1, 2, 2}));
}

TEST_F(PngTest, GrayAndGrayAlphaDecodePlanar) {
  PngSpec s{.width = 2, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY_ALPHA, .rows = {10, 200, 30, 100}};
  const Tensor t = decode_png(encode_png(s), "ga");
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(pixels(t), (std::vector<uint8_t>{10, 30, 200, 100}));
}

TEST_F(PngTest, LowBitDepthGrayIsScaledTo8Bits) {
  // 1-bit: pixels 1,0,1,1 packed MSB first; 2-bit: 0..3 -> 0, 85, 170, 255.
  PngSpec one{.width = 4, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 1, .rows = {0b10110000}};
  EXPECT_EQ(pixels(decode_png(encode_png(one), "1bit")), (std::vector<uint8_t>{255, 0, 255, 255}));
  PngSpec two{.width = 4, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 2, .rows = {0b00011011}};
  EXPECT_EQ(pixels(decode_png(encode_png(two), "2bit")), (std::vector<uint8_t>{0, 85, 170, 255}));
}

TEST_F(PngTest, SixteenBitSamplesAreScaledWithRounding) {
  // v * 255 / 65535 rounded: 0xffff -> 255, 257 * k -> k, 0x00ff -> 1 (stripping the low byte would give 0).
  PngSpec s{.width = 2, .height = 1, .color_type = PNG_COLOR_TYPE_RGB, .bit_depth = 16,
            .rows = {0xff, 0xff, 0x64, 0x64, 0x00, 0xff, 0x00, 0x00, 0x80, 0x80, 0x01, 0x01}};
  EXPECT_EQ(pixels(decode_png(encode_png(s), "16")), (std::vector<uint8_t>{255, 0, 100, 128, 1, 1}));
}

TEST_F(PngTest, PaletteWithTransparencyExpandsToRgba) {
  PngSpec s{.width = 3, .height = 1, .color_type = PNG_COLOR_TYPE_PALETTE, .bit_depth = 8,
            .palette = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}}, .trns = {255, 128}, .rows = {2, 1, 0}};
  const Tensor t = decode_png(encode_png(s), "pal");
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{4, 1, 3}));
  // planes R, G, B, A; entries without a tRNS value are opaque
  EXPECT_EQ(pixels(t), (std::vector<uint8_t>{0, 0, 255, 0, 255, 0, 255, 0, 0, 255, 128, 255}));
  s.trns.clear();
  EXPECT_EQ(decode_png(encode_png(s), "pal").sizes(), (std::vector<int64_t>{3, 1, 3}));
}

TEST_F(PngTest, TransparentGrayColourBecomesAlpha) {
  PngSpec s{.width = 2, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .trns = {0, 7}, .rows = {7, 9}};
  EXPECT_EQ(pixels(decode_png(encode_png(s), "trns")), (std::vector<uint8_t>{7, 9, 0, 255}));
}

TEST_F(PngTest, InterlacedImagesDecodeLikeNonInterlaced) {
  PngSpec s{.width = 9, .height = 7, .color_type = PNG_COLOR_TYPE_RGB};
  for (int i = 0; i < 9 * 7 * 3; ++i) s.rows.push_back(static_cast<uint8_t>(i * 11));
  const Tensor plain = decode_png(encode_png(s), "plain");
  s.interlaced = true;
  const Tensor adam7 = decode_png(encode_png(s), "adam7");
  EXPECT_EQ(pixels(adam7), pixels(plain));
  EXPECT_EQ(plain.data_ptr<uint8_t>()[63 + 1], 4 * 11);  // the G plane starts after 63 R values
}

TEST_F(PngTest, ChannelModesConvert) {
  PngSpec rgba{.width = 1, .height = 1, .color_type = PNG_COLOR_TYPE_RGB_ALPHA, .rows = {200, 100, 50, 7}};
  const Bytes png = encode_png(rgba);
  EXPECT_EQ(pixels(decode_png(png, "x", PngChannels::RGB)), (std::vector<uint8_t>{200, 100, 50}));
  EXPECT_EQ(pixels(decode_png(png, "x", PngChannels::RGBA)), (std::vector<uint8_t>{200, 100, 50, 7}));
  // libpng's default weights (0.2126, 0.7152, 0.0722): 200*.2126 + 100*.7152 + 50*.0722 = 117.6
  const auto gray = pixels(decode_png(png, "x", PngChannels::Gray));
  ASSERT_EQ(gray.size(), 1u);
  EXPECT_NEAR(gray[0], 118, 1);
  PngSpec g{.width = 2, .height = 1, .color_type = PNG_COLOR_TYPE_GRAY, .rows = {5, 6}};
  EXPECT_EQ(pixels(decode_png(encode_png(g), "g", PngChannels::RGB)), (std::vector<uint8_t>{5, 6, 5, 6, 5, 6}));
  EXPECT_EQ(pixels(decode_png(encode_png(g), "g", PngChannels::RGBA)),
            (std::vector<uint8_t>{5, 6, 5, 6, 5, 6, 255, 255}));
}

TEST_F(PngTest, NotAPngIsRejectedWithFileName) {
  write_bytes(path("fake.png"), text_bytes("GIF89a this is not a png at all"));
  EXPECT_THAT(error_of([&] { read_png(path("fake.png")); }),
              HasSubstr(path("fake.png") + ": invalid PNG: libpng: Not a PNG file"));
}

TEST_F(PngTest, TruncatedPngIsRejected) {
  PngSpec s{.width = 16, .height = 16, .color_type = PNG_COLOR_TYPE_RGB};
  for (int i = 0; i < 16 * 16 * 3; ++i) s.rows.push_back(static_cast<uint8_t>(i * 7));
  Bytes png = encode_png(s);
  png.resize(png.size() - 30);
  write_bytes(path("cut.png"), png);
  const std::string msg = error_of([&] { read_png(path("cut.png")); });
  EXPECT_THAT(msg, HasSubstr(path("cut.png") + ": invalid PNG: libpng:"));
  EXPECT_THAT(msg, HasSubstr("(at byte offset "));
  png.resize(20);  // inside the IHDR chunk
  EXPECT_THAT(error_of([&] { decode_png(png, "head.png"); }),
              HasSubstr("head.png: invalid PNG: libpng: unexpected end of file (truncated PNG) (at byte offset 16)"));
}

TEST_F(PngTest, CorruptChunkCrcIsRejected) {
  PngSpec s{.width = 4, .height = 4, .color_type = PNG_COLOR_TYPE_GRAY, .rows = Bytes(16, 3)};
  Bytes png = encode_png(s);
  png[8 + 8 + 2] ^= 0x01;  // a byte of IHDR's data: its CRC no longer matches
  EXPECT_THAT(error_of([&] { decode_png(png, "crc.png"); }), HasSubstr("crc.png: invalid PNG: libpng: IHDR: CRC error"));
}

TEST_F(PngTest, CorruptImageDataIsRejectedInThePixelPass) {
  PngSpec s{.width = 32, .height = 32, .color_type = PNG_COLOR_TYPE_RGB};
  for (int i = 0; i < 32 * 32 * 3; ++i) s.rows.push_back(static_cast<uint8_t>(i * 13 % 251));
  Bytes png = encode_png(s);
  // Find IDAT, scramble its compressed data and fix the chunk CRC so only the data is bad.
  size_t at = 8;
  while (std::memcmp(png.data() + at + 4, "IDAT", 4) != 0)
    at += 12 + ((size_t{png[at]} << 24) | (size_t{png[at + 1]} << 16) | (size_t{png[at + 2]} << 8) | png[at + 3]);
  const size_t len = (size_t{png[at]} << 24) | (size_t{png[at + 1]} << 16) | (size_t{png[at + 2]} << 8) | png[at + 3];
  for (size_t i = at + 8 + 2; i < at + 8 + len; ++i) png[i] = static_cast<uint8_t>(i * 31);
  const uLong crc = crc32(0, png.data() + at + 4, static_cast<uInt>(len + 4));
  for (int k = 0; k < 4; ++k) png[at + 8 + len + static_cast<size_t>(k)] = static_cast<uint8_t>(crc >> (24 - 8 * k));
  EXPECT_THAT(error_of([&] { decode_png(png, "idat.png"); }), HasSubstr("idat.png: invalid PNG: libpng:"));
}

TEST_F(PngTest, AbsurdDimensionsAreRefused) {
  // A valid IHDR claiming 100000 x 100000 RGBA, no image data.
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {100000u, 100000u})
    for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(v >> s));
  png.insert(png.end(), {8, 6, 0, 0, 0});
  const uLong crc = crc32(0, png.data() + 12, 17);
  for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(crc >> s));
  png.insert(png.end(), {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0, 0, 0, 0});  // libpng stops at IDAT's header
  EXPECT_EQ(error_of([&] { decode_png(png, "huge.png"); }),
            "huge.png: absurd PNG size 100000x100000x4: refusing to allocate 40000000000 bytes");
}

TEST_F(PngTest, DimensionsTheFileCannotHoldAreRefusedBeforeAllocating) {
  // 16000 x 16000 gray (256 MB, under the 1 GiB cap) in a 57-byte file: deflate expands at most
  // 1032:1, so no 57-byte file holds more than 58824 bytes of image data.
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {16000u, 16000u})
    for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(v >> s));
  png.insert(png.end(), {8, 0, 0, 0, 0});
  const uLong crc = crc32(0, png.data() + 12, 17);
  for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(crc >> s));
  png.insert(png.end(), {0, 0, 0, 12, 'I', 'D', 'A', 'T'});
  png.resize(png.size() + 12 + 4, 0);  // IDAT data (zeros: no zlib stream) and CRC
  ASSERT_EQ(png.size(), 57u);
  EXPECT_EQ(error_of([&] { decode_png(png, "claims.png"); }),
            "claims.png: PNG header claims 16000x16000 pixels (256000000 bytes of image data), more than a 57-byte "
            "file can hold (deflate expands at most 1032:1): corrupt or truncated file");
  // At the limit the header is believed: 1032 * 57 = 58824 >= 242 * 243 bytes.
  png[16 + 2] = 0, png[16 + 3] = 242, png[20 + 2] = 0, png[20 + 3] = 243;
  const uLong crc2 = crc32(0, png.data() + 12, 17);
  for (int k = 0; k < 4; ++k) png[29 + static_cast<size_t>(k)] = static_cast<uint8_t>(crc2 >> (24 - 8 * k));
  EXPECT_THAT(error_of([&] { decode_png(png, "small.png"); }), HasSubstr("small.png: invalid PNG: libpng:"));
}

TEST_F(PngTest, WritePngRejectsBadTensorsAndUnwritablePaths) {
  EXPECT_THAT(error_of([&] { write_png(path("f.png"), zeros({3, 2, 2})); }),
              HasSubstr("expected a uint8 image, got float32"));
  EXPECT_THAT(error_of([&] { write_png(path("f.png"), zeros({5, 2, 2}, DType::UInt8)); }),
              HasSubstr("5 channels (PNG takes 1, 2, 3 or 4)"));
  EXPECT_THAT(error_of([&] { write_png(path("no/such/dir/f.png"), zeros({1, 2, 2}, DType::UInt8)); }),
              HasSubstr("write_png: cannot create"));
  EXPECT_TRUE(std::none_of(fs::directory_iterator(dir_), fs::directory_iterator(), [](const auto&) { return true; }));
}

}  // namespace
