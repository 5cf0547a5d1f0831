#include "curve_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qflow/core/factory.h"
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
};

void draw_panel(Canvas& canvas, int top, int height, const std::vector<Series>& series) {
  const unsigned char axis[3] = {90, 90, 90}, grid[3] = {225, 225, 225};
  const int left = 40, right = canvas.w - 10, bottom = top + height - 20, upper = top + 10;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t n = 0;
  for (const auto& s : series) {
    for (double v : s.values)
      if (std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
    n = std::max(n, s.values.size());
  }
  if (!std::isfinite(lo)) { lo = 0; hi = 1; }
  if (hi - lo < 1e-12) { hi += 0.5; lo -= 0.5; }
  for (int g = 0; g <= 4; ++g) {
    const int y = bottom - (bottom - upper) * g / 4;
    canvas.line(left, y, right, y, grid);
  }
  canvas.line(left, upper, left, bottom, axis);
  canvas.line(left, bottom, right, bottom, axis);
  auto to_x = [&](size_t i) { return n <= 1 ? left : left + static_cast<int>((right - left) * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto to_y = [&](double v) { return bottom - static_cast<int>((bottom - upper) * (v - lo) / (hi - lo)); };
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
