#include "curve_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>

#include "qflow/core/factory.h"
#include "qflow/data/bitmap_font.h"
#include "qflow/data/png.h"

namespace qflow::tools {

namespace {

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;  // (3, h, w)
  Canvas(int width, int height) : w(width), h(height), px(static_cast<size_t>(3 * width * height), 255) {}
  void set(int x, int y, const unsigned char rgb[3]) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    for (int c = 0; c < 3; ++c) px[static_cast<size_t>((c * h + y) * w + x)] = rgb[c];
  }
  // Bresenham, drawn 2 px thick.
  void line(int x0, int y0, int x1, int y1, const unsigned char rgb[3]) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    while (true) {
      set(x0, y0, rgb);
      set(x0, y0 + 1, rgb);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) { err += dy; x0 += sx; }
      if (e2 <= dx) { err += dx; y0 += sy; }
    }
  }
  void text(std::string_view s, int x, int y, const unsigned char rgb[3]) {
    data::draw_text(s, x, y, [&](int px, int py) { set(px, py, rgb); });
  }
};

// Epoch labels every `step` epochs, with step in 1, 2, 5, 10, 20, ... so the labels fit.
size_t epoch_step(size_t n, int plot_width) {
  const int label = data::text_width(std::to_string(n)) + 12;
  const size_t fit = static_cast<size_t>(std::max(1, plot_width / label));
  for (size_t base = 1;; base *= 10)
    for (size_t m : {1, 2, 5})
      if (n <= fit * base * m) return base * m;
}

// Layout: a legend line (series names in their colours), the plot with five value labels on y
// and epoch numbers on x, and "EPOCH" under the x axis.
void draw_panel(Canvas& canvas, int top, int height, const std::vector<Series>& series) {
  const unsigned char axis[3] = {90, 90, 90}, grid[3] = {225, 225, 225};
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t n = 0;
  for (const auto& s : series) {
    for (double v : s.values)
      if (std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
    n = std::max(n, s.values.size());
  }
  if (!std::isfinite(lo)) { lo = 0; hi = 1; }
  if (hi - lo < 1e-12) { hi += 0.5; lo -= 0.5; }
  std::vector<std::string> y_labels;
  int label_width = 0;
  for (int g = 0; g <= 4; ++g) {
    y_labels.push_back(fmt::format("{:.4g}", lo + (hi - lo) * g / 4));
    label_width = std::max(label_width, data::text_width(y_labels.back()));
  }
  const int left = label_width + 10, right = canvas.w - 12, upper = top + data::kGlyphHeight + 12,
            bottom = top + height - 2 * data::kGlyphHeight - 14;
  int x = left;
  for (const auto& s : series) {  // legend
    std::string name = s.name;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    canvas.text(name, x, top + 5, s.rgb);
    x += data::text_width(name) + 3 * data::kGlyphAdvance;
  }
  for (int g = 0; g <= 4; ++g) {
    const int y = bottom - (bottom - upper) * g / 4;
    canvas.line(left, y, right, y, grid);
    const std::string& label = y_labels[static_cast<size_t>(g)];
    canvas.text(label, left - 5 - data::text_width(label), y - data::kGlyphHeight / 2, axis);
  }
  canvas.line(left, upper, left, bottom, axis);
  canvas.line(left, bottom, right, bottom, axis);
  auto to_x = [&](size_t i) { return n <= 1 ? left : left + static_cast<int>((right - left) * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto to_y = [&](double v) { return bottom - static_cast<int>((bottom - upper) * (v - lo) / (hi - lo)); };
  if (n > 0) {
    const size_t step = epoch_step(n, right - left);
    for (size_t epoch = step == 1 ? 1 : step; epoch <= n; epoch += step) {  // record i is epoch i + 1
      const std::string label = std::to_string(epoch);
      canvas.line(to_x(epoch - 1), bottom, to_x(epoch - 1), bottom + 2, axis);
      canvas.text(label, to_x(epoch - 1) - data::text_width(label) / 2, bottom + 5, axis);
    }
    canvas.text("EPOCH", (left + right - data::text_width("EPOCH")) / 2, bottom + 7 + data::kGlyphHeight, axis);
  }
  for (const auto& s : series)
    for (size_t i = 0; i + 1 < s.values.size(); ++i)
      if (std::isfinite(s.values[i]) && std::isfinite(s.values[i + 1]))
        canvas.line(to_x(i), to_y(s.values[i]), to_x(i + 1), to_y(s.values[i + 1]), s.rgb);
  if (n == 1)
    for (const auto& s : series)
      if (!s.values.empty()) canvas.line(to_x(0) - 3, to_y(s.values[0]), to_x(0) + 3, to_y(s.values[0]), s.rgb);
}

}  // namespace

void write_curves_png(const std::string& path, const std::vector<std::vector<Series>>& panels, int width, int panel_height) {
  Canvas canvas(width, panel_height * static_cast<int>(panels.size()));
  for (size_t p = 0; p < panels.size(); ++p) draw_panel(canvas, static_cast<int>(p) * panel_height, panel_height, panels[p]);
  Tensor image = from_vector<uint8_t>(canvas.px, {3, canvas.h, canvas.w});
  data::write_png(path, image);
}

}  // namespace qflow::tools
