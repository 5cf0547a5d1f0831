// Image grids with colour bands and bitmap-font labels.
#include "viz/image_grid.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "qflow/core/error.h"
#include "qflow/core/factory.h"
#include "qflow/data/png.h"
#include "viz/bitmap_font.h"

namespace qflow::viz {

namespace {

using Rgb = std::array<uint8_t, 3>;

// matplotlib's tab10: distinct, readable under white or black text.
constexpr Rgb kPalette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},   {148, 103, 189},
                            {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
constexpr Rgb kBackground = {24, 24, 24};
constexpr int kGap = 2;
constexpr int kBand = kGlyphHeight + 4;
constexpr int kLegendLine = kGlyphHeight + 3;

Rgb class_color(int64_t label) { return kPalette[static_cast<size_t>(label) % std::size(kPalette)]; }

Rgb text_color(Rgb bg) {
  const int luma = (299 * bg[0] + 587 * bg[1] + 114 * bg[2]) / 1000;
  return luma < 150 ? Rgb{255, 255, 255} : Rgb{0, 0, 0};
}

// A (3, H, W) uint8 canvas with clipped drawing.
class Canvas {
 public:
  Canvas(int64_t h, int64_t w) : t_(empty({3, h, w}, DType::UInt8)), h_(h), w_(w) {
    p_ = t_.data_ptr<uint8_t>();
    fill(0, 0, w, h, kBackground);
  }
  void set(int64_t x, int64_t y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    for (int k = 0; k < 3; ++k) p_[(k * h_ + y) * w_ + x] = c[static_cast<size_t>(k)];
  }
  void fill(int64_t x, int64_t y, int64_t w, int64_t h, Rgb c) {
    for (int64_t j = y; j < y + h; ++j)
      for (int64_t i = x; i < x + w; ++i) set(i, j, c);
  }
  void text(std::string_view s, int64_t x, int64_t y, Rgb c) {
    draw_text(s, 0, 0, [&](int dx, int dy) { set(x + dx, y + dy, c); });
  }
  const Tensor& tensor() const { return t_; }

 private:
  Tensor t_;
  uint8_t* p_;
  int64_t h_, w_;
};

std::string upper_fit(const std::string& s, int64_t max_chars) {
  std::string out = s.substr(0, static_cast<size_t>(std::max<int64_t>(0, max_chars)));
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Image n as 8-bit display values (C, H, W), float images un-normalized and clamped.
std::vector<uint8_t> display_pixels(const Tensor& images, int64_t n, const ImageGridOptions& o) {
  const Tensor img = images.select(0, n).contiguous();
  const int64_t c = img.sizes()[0], plane = img.sizes()[1] * img.sizes()[2];
  std::vector<uint8_t> out(static_cast<size_t>(c * plane));
  if (img.dtype() == DType::UInt8) {
    std::copy_n(img.data_ptr<uint8_t>(), out.size(), out.begin());
    return out;
  }
  const Tensor f = img.to(DType::Float64).contiguous();
  const double* s = f.data_ptr<double>();
  for (int64_t ch = 0; ch < c; ++ch) {
    const size_t k = o.mean.size() == 1 ? 0 : static_cast<size_t>(ch);
    const double mean = o.mean.empty() ? 0.0 : o.mean[k], std = o.std.empty() ? 1.0 : o.std[k];
    for (int64_t i = ch * plane; i < (ch + 1) * plane; ++i)
      out[static_cast<size_t>(i)] = static_cast<uint8_t>(std::lround(std::clamp(s[i] * std + mean, 0.0, 1.0) * 255.0));
  }
  return out;
}

}  // namespace

Tensor make_image_grid(const Tensor& images, const Tensor& labels, const std::vector<std::string>& class_names,
                       const ImageGridOptions& o) {
  QFLOW_CHECK(images.defined() && images.dim() == 4 && images.sizes()[0] >= 1,
              "make_image_grid: expected images (N, C, H, W) with N >= 1, got shape {}",
              images.defined() ? images.sizes() : std::vector<int64_t>{});
  const int64_t n = images.sizes()[0], c = images.sizes()[1], h = images.sizes()[2], w = images.sizes()[3];
  QFLOW_CHECK(c >= 1 && c <= 4, "make_image_grid: images need 1 to 4 channels, got {}", c);
  QFLOW_CHECK(images.dtype() == DType::UInt8 || images.is_floating_point(),
              "make_image_grid: images must be uint8 or floating point, got {}", images.dtype());
  QFLOW_CHECK(o.columns >= 1 && o.scale >= 0, "make_image_grid: columns must be >= 1 and scale >= 0");
  const size_t channels_meta = static_cast<size_t>(c == 2 || c == 4 ? c - 1 : c);
  QFLOW_CHECK(o.mean.size() == o.std.size() && (o.mean.empty() || o.mean.size() == 1 || o.mean.size() == channels_meta),
              "make_image_grid: mean/std need 1 or {} entries each, got {} and {}", channels_meta, o.mean.size(),
              o.std.size());
  const bool labelled = labels.defined();
  std::vector<int64_t> label_values;
  if (labelled) {
    QFLOW_CHECK(labels.dim() == 1 && labels.sizes()[0] == n, "make_image_grid: expected {} labels, got shape {}", n,
                labels.sizes());
    label_values = to_vector<int64_t>(labels);
    for (int64_t l : label_values)
      QFLOW_CHECK(l >= 0 && (class_names.empty() || l < static_cast<int64_t>(class_names.size())),
                  "make_image_grid: label {} outside the {} class names", l, class_names.size());
  }

  const int64_t scale = o.scale > 0 ? o.scale : std::max<int64_t>(1, (64 + std::max(h, w) - 1) / std::max(h, w));
  const int64_t cell_w = w * scale, cell_h = h * scale + (labelled ? kBand : 0);
  const int64_t cols = std::min(o.columns, n), rows = (n + cols - 1) / cols;
  std::set<int64_t> shown(label_values.begin(), label_values.end());
  int64_t legend_chars = 0;
  for (int64_t l : shown)
    legend_chars = std::max<int64_t>(legend_chars, static_cast<int64_t>(fmt::format("{} ", l).size()) +
                                                        (class_names.empty() ? 0 : static_cast<int64_t>(class_names[static_cast<size_t>(l)].size())));
  const int64_t legend_h = labelled ? kGap + static_cast<int64_t>(shown.size()) * kLegendLine : 0;
  const int64_t grid_w = kGap + cols * (cell_w + kGap);
  const int64_t width = labelled ? std::max(grid_w, 2 * kGap + kGlyphAdvance * (legend_chars + 2)) : grid_w;
  Canvas canvas(kGap + rows * (cell_h + kGap) + legend_h, width);

  const int64_t shown_c = c >= 3 ? 3 : 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x0 = kGap + (i % cols) * (cell_w + kGap), y0 = kGap + (i / cols) * (cell_h + kGap);
    const std::vector<uint8_t> px = display_pixels(images, i, o);
    for (int64_t y = 0; y < h * scale; ++y)
      for (int64_t x = 0; x < w * scale; ++x) {
        const int64_t at = (y / scale) * w + x / scale;
        Rgb rgb;
        for (int64_t k = 0; k < 3; ++k) rgb[static_cast<size_t>(k)] = px[static_cast<size_t>((shown_c == 3 ? k : 0) * h * w + at)];
        canvas.set(x0 + x, y0 + y, rgb);
      }
    if (!labelled) continue;
    const int64_t l = label_values[static_cast<size_t>(i)];
    const Rgb band = class_color(l);
    const int64_t band_y = y0 + h * scale;
    canvas.fill(x0, band_y, cell_w, kBand, band);
    std::string text = std::to_string(l);
    const int64_t fit = (cell_w - 2) / kGlyphAdvance;
    if (!class_names.empty() && fit > static_cast<int64_t>(text.size()) + 1) {
      const int64_t room = fit - static_cast<int64_t>(text.size()) - 1;
      text.push_back(' ');
      text.append(upper_fit(class_names[static_cast<size_t>(l)], room));
    }
    canvas.text(text, x0 + 2, band_y + 2, text_color(band));
  }

  int64_t y = kGap + rows * (cell_h + kGap);
  for (int64_t l : shown) {  // legend: swatch, index, full name
    canvas.fill(kGap, y, kGlyphHeight, kGlyphHeight, class_color(l));
    const std::string name = class_names.empty() ? "" : class_names[static_cast<size_t>(l)];
    canvas.text(upper_fit(fmt::format("{} {}", l, name), legend_chars), kGap + kGlyphAdvance * 2, y,
                {230, 230, 230});
    y += kLegendLine;
  }
  return canvas.tensor();
}

void write_image_grid(const std::string& path, const Tensor& images, const Tensor& labels,
                      const std::vector<std::string>& class_names, const ImageGridOptions& options) {
  data::write_png(path, make_image_grid(images, labels, class_names, options));
}

void write_image_grid(const std::string& path, const Tensor& images, const Tensor& labels,
                      const std::vector<std::string>& class_names, int64_t columns) {
  ImageGridOptions options;
  options.columns = columns;
  write_image_grid(path, images, labels, class_names, options);
}

}  // namespace qflow::viz
