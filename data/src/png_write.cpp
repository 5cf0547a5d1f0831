// PNG encoding with libpng; errors follow Note [libpng and longjmp] (png_read.cpp).
#include <png.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "qflow/core/error.h"
#include "qflow/data/png.h"

namespace qflow::data {

namespace {

struct WriteContext {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::FILE* file = nullptr;
  char message[256] = {};

  ~WriteContext() {
    if (png != nullptr) png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
    if (file != nullptr) std::fclose(file);
  }
};

[[noreturn]] void on_error(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<WriteContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof(ctx->message), "%s", msg);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

// Only trivially destructible locals: see Note [libpng and longjmp].
bool write_rows(WriteContext& ctx, png_bytep* rows, uint32_t width, uint32_t height, int color_type) {
  png_structp png = ctx.png;
  png_infop info = ctx.info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_init_io(png, ctx.file);
  png_set_IHDR(png, info, width, height, 8, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

int color_type_for(int64_t channels) {
  switch (channels) {
    case 1: return PNG_COLOR_TYPE_GRAY;
    case 2: return PNG_COLOR_TYPE_GRAY_ALPHA;
    case 3: return PNG_COLOR_TYPE_RGB;
    default: return PNG_COLOR_TYPE_RGB_ALPHA;
  }
}

std::atomic<uint64_t> g_temp_counter{0};

}  // namespace

void write_png(const std::string& path, const Tensor& image) {
  QFLOW_CHECK(image.dtype() == DType::UInt8, "write_png: {}: expected a uint8 image, got {}", path, image.dtype());
  QFLOW_CHECK(image.dim() == 2 || image.dim() == 3, "write_png: {}: expected (C, H, W) or (H, W), got shape {}", path,
              image.sizes());
  const Tensor chw = (image.dim() == 2 ? image.unsqueeze(0) : image).contiguous();
  const int64_t c = chw.sizes()[0], h = chw.sizes()[1], w = chw.sizes()[2];
  QFLOW_CHECK(c >= 1 && c <= 4, "write_png: {}: {} channels (PNG takes 1, 2, 3 or 4)", path, c);
  QFLOW_CHECK(h >= 1 && w >= 1 && h <= PNG_USER_HEIGHT_MAX && w <= PNG_USER_WIDTH_MAX,
              "write_png: {}: image size {}x{} out of PNG's range", path, h, w);

  // Planar (C, H, W) -> interleaved rows.
  const uint8_t* src = chw.data_ptr<uint8_t>();
  std::vector<uint8_t> interleaved(static_cast<size_t>(c * h * w));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < h * w; ++i) interleaved[static_cast<size_t>(i * c + ch)] = src[ch * h * w + i];
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) rows[static_cast<size_t>(y)] = interleaved.data() + y * w * c;

  // Written next to the target and renamed, so a reader never sees half a file.
  const std::string temp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), g_temp_counter++);
  WriteContext ctx;
  ctx.file = std::fopen(temp.c_str(), "wb");
  QFLOW_CHECK(ctx.file != nullptr, "write_png: cannot create {}: {}", temp,
              std::error_code(errno, std::generic_category()).message());
  ctx.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, on_error, on_warning);
  ctx.info = ctx.png != nullptr ? png_create_info_struct(ctx.png) : nullptr;
  bool ok = ctx.info != nullptr && write_rows(ctx, rows.data(), static_cast<uint32_t>(w), static_cast<uint32_t>(h),
                                              color_type_for(c));
  ok = std::fclose(ctx.file) == 0 && ok;
  ctx.file = nullptr;
  if (!ok) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    QFLOW_FAIL("write_png: writing {} failed{}{}", path, ctx.message[0] != '\0' ? ": libpng: " : "", ctx.message);
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string reason = ec.message();
    std::filesystem::remove(temp, ec);
    QFLOW_FAIL("write_png: cannot rename {} to {}: {}", temp, path, reason);
  }
}

}  // namespace qflow::data
