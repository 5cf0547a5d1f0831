#pragma once
// Helpers for the data tests: a scratch directory per test and writers for the real file
// formats (tar, gzip, CIFAR-10 records, IDX, PNG in every colour type), so every test builds
// its own small inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "qflow/data/data.h"
#include "qflow/qflow.h"
#include "error_of.h"

namespace qflow::data::testing {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

/// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("qflow_data_{}_{}_{}", ::getpid(), info->test_suite_name(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline Bytes text_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

/// gzip-compresses `data` (one gzip member) with zlib.
inline Bytes gzip(const Bytes& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, static_cast<uLong>(data.size())) + 32);
  z.next_in = const_cast<Bytef*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

using ::qflow::testing_util::error_of;  // tests/error_of.h

// ---- tar -----------------------------------------------------------------------------------------
struct TarMember {
  std::string name;
  Bytes data;
  char type = '0';
};

/// One ustar header block (POSIX magic), checksum filled in.
inline Bytes tar_header(const std::string& name, uint64_t size, char type) {
  Bytes h(512, 0);
  std::memcpy(h.data(), name.data(), std::min<size_t>(name.size(), 100));
  auto octal = [&](size_t at, size_t width, uint64_t v) {
    const std::string s = fmt::format("{:0{}o}", v, width - 1);
    std::memcpy(h.data() + at, s.data(), width - 1);
  };
  octal(100, 8, 0644);
  octal(108, 8, 1000);
  octal(116, 8, 1000);
  octal(124, 12, size);
  octal(136, 12, 1700000000);
  h[156] = static_cast<uint8_t>(type);
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  const std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(h.data() + 148, chk.data(), 6);
  h[154] = 0;
  h[155] = ' ';
  return h;
}

/// A tar archive of `members`; names longer than 100 bytes get a GNU long-name member.
inline Bytes make_tar(const std::vector<TarMember>& members) {
  Bytes out;
  auto append = [&](const Bytes& header, const Bytes& data) {
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    out.resize(out.size() + (512 - data.size() % 512) % 512, 0);
  };
  for (const TarMember& m : members) {
    if (m.name.size() > 100) {
      Bytes name(m.name.begin(), m.name.end());
      name.push_back(0);
      append(tar_header("././@LongLink", name.size(), 'L'), name);
    }
    append(tar_header(m.name, m.data.size(), m.type), m.data);
  }
  out.resize(out.size() + 1024, 0);  // end-of-archive marker
  return out;
}

// ---- CIFAR-10 ------------------------------------------------------------------------------------
/// The pixel of record `r`, channel `c`, position `i` in the test batches.
inline uint8_t cifar_pixel(int64_t r, int64_t c, int64_t i) { return static_cast<uint8_t>((r * 7 + c * 50 + i) % 256); }

/// `records` CIFAR-10 records whose labels are (first + r) % 10.
inline Bytes cifar_batch(int64_t records, int64_t first = 0) {
  Bytes out;
  for (int64_t r = first; r < first + records; ++r) {
    out.push_back(static_cast<uint8_t>(r % 10));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 1024; ++i) out.push_back(cifar_pixel(r, c, i));
  }
  return out;
}

// ---- IDX -----------------------------------------------------------------------------------------
inline Bytes idx_file(uint8_t ndim, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out = {0, 0, 0x08, ndim};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(d >> s));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// ---- PNG -----------------------------------------------------------------------------------------
struct PngSpec {
  uint32_t width = 0, height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;
  int bit_depth = 8;
  bool interlaced = false;
  std::vector<png_color> palette = {};
  Bytes trns = {};        // palette alpha values, or for gray/RGB the transparent colour (16-bit big-endian)
  Bytes rows = {};        // packed rows exactly as PNG stores them
};

namespace detail_png {
inline void on_error(png_structp png, png_const_charp) { png_longjmp(png, 1); }
inline void on_write(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
inline void on_flush(png_structp) {}
// setjmp frame without C++ objects (see the reader's Note [libpng and longjmp]).
inline bool encode(png_structp png, png_infop info, const PngSpec& s, png_bytep* rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_IHDR(png, info, s.width, s.height, s.bit_depth, s.color_type,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), static_cast<int>(s.palette.size()));
  if (!s.trns.empty()) {
    if (s.color_type == PNG_COLOR_TYPE_PALETTE) {
      png_set_tRNS(png, info, s.trns.data(), static_cast<int>(s.trns.size()), nullptr);
    } else {
      png_color_16 c{};
      c.gray = c.red = static_cast<png_uint_16>((s.trns[0] << 8) | s.trns[1]);
      if (s.trns.size() >= 6) {
        c.green = static_cast<png_uint_16>((s.trns[2] << 8) | s.trns[3]);
        c.blue = static_cast<png_uint_16>((s.trns[4] << 8) | s.trns[5]);
      }
      png_set_tRNS(png, info, nullptr, 0, &c);
    }
  }
  png_write_info(png, info);
  png_set_interlace_handling(png);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}
}  // namespace detail_png

/// Encodes `spec` with libpng (any colour type and bit depth, for the reader's tests).
inline Bytes encode_png(const PngSpec& spec) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, detail_png::on_error, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, detail_png::on_write, detail_png::on_flush);
  const size_t row_bytes = spec.rows.size() / spec.height;
  std::vector<png_bytep> rows(spec.height);
  for (uint32_t y = 0; y < spec.height; ++y) rows[y] = const_cast<png_bytep>(spec.rows.data()) + y * row_bytes;
  const bool ok = detail_png::encode(png, info, spec, rows.data());
  png_destroy_write_struct(&png, &info);
  EXPECT_TRUE(ok);
  return out;
}

}  // namespace qflow::data::testing
