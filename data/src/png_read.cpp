// PNG decoding with libpng's low-level API.
//
// Note [libpng and longjmp]
// libpng reports errors by calling our error callback, which must not return: it longjmps
// back to the setjmp in the function that called libpng. longjmp skips destructors, so the
// functions holding a setjmp (read_header, read_pixels) keep nothing but trivially
// destructible locals and call only libpng, and every C++ object (buffers, the tensor, the
// guard that destroys the png structs) lives in their caller, which is never skipped. No leak
// and no undefined behaviour whatever libpng rejects.
#include <png.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "qflow/core/error.h"
#include "qflow/data/byte_reader.h"
#include "qflow/data/png.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace {

// Width * height * channels above this (1 GiB) is a broken or hostile header.
constexpr uint64_t kMaxPixelBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
// Deflate expands at most 1032:1 (a 258-byte match in two bits), so a file of n bytes holds at
// most 1032 n bytes of image data: a header claiming more is refused before the pixel buffer
// is allocated (a 70-byte file could otherwise make the reader allocate up to 1 GiB).
constexpr uint64_t kMaxDeflateRatio = 1032;

struct ReadContext {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  char message[256] = {};

  ~ReadContext() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

[[noreturn]] void on_error(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<ReadContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof(ctx->message), "%s", msg);
  png_longjmp(png, 1);
}

// Warnings (a bad colour profile, an unknown ancillary chunk) leave the pixels intact.
void on_warning(png_structp, png_const_charp) {}

void read_data(png_structp png, png_bytep out, size_t n) {
  auto* ctx = static_cast<ReadContext*>(png_get_io_ptr(png));
  if (n > ctx->size - ctx->pos) png_error(png, "unexpected end of file (truncated PNG)");
  std::memcpy(out, ctx->data + ctx->pos, n);
  ctx->pos += n;
}

struct Header {
  uint32_t width = 0, height = 0;
  int channels = 0;        // after the conversions
  int stored_bits = 0;     // bits per pixel in the file (before the conversions)
};

// Sets up the 8-bit conversions for `mode`. See Note [libpng and longjmp] (no C++ objects here).
bool read_header(ReadContext& ctx, PngChannels mode, Header& out) {
  png_structp png = ctx.png;
  png_infop info = ctx.info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  out.stored_bits = depth * png_get_channels(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  const bool trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (trns) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_scale_16(png);
  png_set_interlace_handling(png);

  const bool gray = (color & PNG_COLOR_MASK_COLOR) == 0;
  const bool alpha = (color & PNG_COLOR_MASK_ALPHA) != 0 || trns;
  switch (mode) {
    case PngChannels::Native: break;
    case PngChannels::Gray:
      if (!gray) png_set_rgb_to_gray_fixed(png, 1, -1, -1);
      if (alpha) png_set_strip_alpha(png);
      break;
    case PngChannels::RGB:
      if (gray) png_set_gray_to_rgb(png);
      if (alpha) png_set_strip_alpha(png);
      break;
    case PngChannels::RGBA:
      if (gray) png_set_gray_to_rgb(png);
      if (!alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
      break;
  }
  png_read_update_info(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  out.channels = png_get_channels(png, info);
  return true;
}

// Decodes all rows (every interlace pass) into `rows`. See Note [libpng and longjmp].
bool read_pixels(ReadContext& ctx, png_bytep* rows) {
  png_structp png = ctx.png;
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

std::string failure(const ReadContext& ctx, const std::string& name) {
  return fmt::format("{}: invalid PNG: libpng: {} (at byte offset {})", name, ctx.message, ctx.pos);
}

}  // namespace

Tensor decode_png(std::span<const uint8_t> bytes, const std::string& name, PngChannels channels) {
  ReadContext ctx;
  ctx.data = bytes.data();
  ctx.size = bytes.size();
  ctx.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, on_error, on_warning);
  QFLOW_CHECK(ctx.png != nullptr, "{}: cannot create a libpng read struct", name);
  ctx.info = png_create_info_struct(ctx.png);
  QFLOW_CHECK(ctx.info != nullptr, "{}: cannot create a libpng info struct", name);
  png_set_read_fn(ctx.png, &ctx, read_data);
  // Ancillary chunks qflow never uses (text, ICC profiles, EXIF, ...) are skipped unread:
  // libpng allocates a buffer of a chunk's declared length before reading the chunk, so a
  // 70-byte file declaring a 1.4 GB zTXt chunk made it allocate 1.4 GB (found by fuzzing).
  // tRNS, PLTE and the fixed-size colour chunks (gAMA, cHRM, sRGB) are still read.
  static constexpr png_byte kIgnored[] = "bKGD\0eXIf\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0tEXt\0tIME\0zTXt";
  png_set_keep_unknown_chunks(ctx.png, PNG_HANDLE_CHUNK_NEVER, kIgnored, static_cast<int>(sizeof(kIgnored) / 5));

  Header h;
  QFLOW_CHECK(read_header(ctx, channels, h), "{}", failure(ctx, name));
  const uint64_t pixel_bytes = uint64_t{h.width} * h.height * static_cast<uint64_t>(h.channels);
  QFLOW_CHECK(pixel_bytes <= kMaxPixelBytes, "{}: absurd PNG size {}x{}x{}: refusing to allocate {} bytes", name,
              h.width, h.height, h.channels, pixel_bytes);
  // The packed pixels alone (filter bytes not counted), against what the file can inflate to.
  const uint64_t stored_bytes = (uint64_t{h.width} * h.height * static_cast<uint64_t>(h.stored_bits) + 7) / 8;
  QFLOW_CHECK(stored_bytes <= kMaxDeflateRatio * bytes.size(),
              "{}: PNG header claims {}x{} pixels ({} bytes of image data), more than a {}-byte file can hold "
              "(deflate expands at most {}:1): corrupt or truncated file",
              name, h.width, h.height, stored_bytes, bytes.size(), kMaxDeflateRatio);

  // libpng delivers interleaved rows (H, W, C); the tensor is planar (C, H, W).
  const size_t row_bytes = size_t{h.width} * static_cast<size_t>(h.channels);
  QFLOW_CHECK(png_get_rowbytes(ctx.png, ctx.info) == row_bytes, "{}: unexpected PNG row size", name);
  std::vector<uint8_t> interleaved(static_cast<size_t>(pixel_bytes));
  std::vector<png_bytep> rows(h.height);
  for (uint32_t y = 0; y < h.height; ++y) rows[y] = interleaved.data() + size_t{y} * row_bytes;
  QFLOW_CHECK(read_pixels(ctx, rows.data()), "{}", failure(ctx, name));

  const int64_t c = h.channels, hw = int64_t{h.width} * h.height;
  Tensor image = detail::new_tensor({c, int64_t{h.height}, int64_t{h.width}}, DType::UInt8);
  uint8_t* out = image.data_ptr<uint8_t>();
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < hw; ++i) out[ch * hw + i] = interleaved[static_cast<size_t>(i * c + ch)];
  return image;
}

Tensor read_png(const std::string& path, PngChannels channels) {
  FileReader file(path);
  const uint64_t size = *file.size();
  QFLOW_CHECK(size <= kMaxFileBytes, "{}: oversized: {} bytes is no image file", path, size);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  file.read_exact(bytes.data(), bytes.size(), "PNG data");
  return decode_png(bytes, path, channels);
}

}  // namespace qflow::data
