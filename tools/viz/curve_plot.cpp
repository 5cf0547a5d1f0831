#include "viz/curve_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>

#include "qflow/core/factory.h"
#include "qflow/data/png.h"
#include "viz/bitmap_font.h"

namespace qflow::viz {

namespace {

// Every glyph pixel drawn as a kText x kText block: 10x14-pixel characters.
constexpr int kText = 2;
constexpr int kCharHeight = kGlyphHeight * kText;

int scaled_width(std::string_view s) { return text_width(s) * kText; }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;  // (3, h, w)
  Canvas(int width, int height) : w(width), h(height), px(static_cast<size_t>(3 * width * height), 255) {}
  void set(int x, int y, const unsigned char rgb[3]) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    for (int c = 0; c < 3; ++c) px[static_cast<size_t>((c * h + y) * w + x)] = rgb[c];
  }
  void block(int x, int y, int size, const unsigned char rgb[3]) {
    for (int dy = 0; dy < size; ++dy)
      for (int dx = 0; dx < size; ++dx) set(x + dx, y + dy, rgb);
  }
  // Bresenham, drawn `thick` px thick.
  void line(int x0, int y0, int x1, int y1, const unsigned char rgb[3], int thick = 2) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    while (true) {
      block(x0, y0, thick, rgb);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) { err += dy; x0 += sx; }
      if (e2 <= dx) { err += dx; y0 += sy; }
    }
  }
  // Left to right with its top-left corner at (x, y).
  void text(std::string_view s, int x, int y, const unsigned char rgb[3]) {
    draw_text(s, 0, 0, [&](int gx, int gy) { block(x + gx * kText, y + gy * kText, kText, rgb); });
  }
  // Bottom to top (rotated a quarter turn anticlockwise), its first character's lower-left at (x, y).
  void text_up(std::string_view s, int x, int y, const unsigned char rgb[3]) {
    draw_text(s, 0, 0, [&](int gx, int gy) { block(x + gy * kText, y - (gx + 1) * kText, kText, rgb); });
  }
};

// Tick spacing from 1, 2, 5 x 10^k giving at most `fit` intervals over `span`.
double tick_step(double span, int fit) {
  const double raw = span / std::max(1, fit);
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (base * m >= raw) return base * m;
  return base * 10;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  // An empty range becomes [0, 1]; a single value gets room around it.
  void settle(double pad) {
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (hi - lo < 1e-12) lo -= pad, hi += pad;
  }
};

// Layout: a legend line (series names in their colours), the y title written upwards at the
// left edge, five value labels on y, ticks and numbers on x with `x_label` under them.
void draw_panel(Canvas& canvas, int top, int height, const Panel& panel, const std::string& x_label) {
  const unsigned char axis[3] = {70, 70, 70}, grid[3] = {225, 225, 225};
  Range xs, ys;
  for (const auto& s : panel.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.y[i])) xs.add(s.x[i]), ys.add(s.y[i]);
  xs.settle(1.0);
  ys.settle(0.5);
  // A margin above and below, so no point sits on an axis.
  const double margin = 0.05 * (ys.hi - ys.lo);
  ys.lo -= margin, ys.hi += margin;
  bool whole_x = true;  // optimizer steps, epochs: no ticks between them
  for (const auto& s : panel.series)
    for (double x : s.x) whole_x = whole_x && x == std::floor(x);
  std::vector<std::string> y_labels;
  int label_width = 0;
  for (int g = 0; g <= 4; ++g) {
    y_labels.push_back(fmt::format("{:.4g}", ys.lo + (ys.hi - ys.lo) * g / 4));
    label_width = std::max(label_width, scaled_width(y_labels.back()));
  }
  const int left = kCharHeight + 16 + label_width + 8, right = canvas.w - 24;
  const int upper_edge = top + kCharHeight + 20, bottom = top + height - 2 * kCharHeight - 24;
  int x = left;
  for (const auto& s : panel.series) {  // legend
    const std::string name = upper(s.name);
    canvas.text(name, x, top + 8, s.rgb);
    x += scaled_width(name) + 3 * kGlyphAdvance * kText;
  }
  canvas.text_up(upper(panel.y_label), 6, (upper_edge + bottom + scaled_width(panel.y_label)) / 2, axis);
  for (int g = 0; g <= 4; ++g) {
    const int y = bottom - (bottom - upper_edge) * g / 4;
    canvas.line(left, y, right, y, grid, 1);
    const std::string& label = y_labels[static_cast<size_t>(g)];
    canvas.text(label, left - 8 - scaled_width(label), y - kCharHeight / 2, axis);
  }
  canvas.line(left, upper_edge, left, bottom, axis);
  canvas.line(left, bottom, right, bottom, axis);
  auto to_x = [&](double v) { return left + static_cast<int>(std::lround((right - left) * (v - xs.lo) / (xs.hi - xs.lo))); };
  auto to_y = [&](double v) { return bottom - static_cast<int>(std::lround((bottom - upper_edge) * (v - ys.lo) / (ys.hi - ys.lo))); };
  // x ticks at multiples of a round step, as many as fit with their numbers.
  const int widest = scaled_width(fmt::format("{:.6g}", std::max(std::abs(xs.lo), std::abs(xs.hi)))) + 3 * kText * kGlyphAdvance;
  const double step = std::max(tick_step(xs.hi - xs.lo, (right - left) / std::max(1, widest)), whole_x ? 1.0 : 0.0);
  for (double t = std::ceil(xs.lo / step) * step; t <= xs.hi + step * 1e-9; t += step) {
    const std::string label = fmt::format("{:.6g}", std::abs(t) < step * 1e-9 ? 0.0 : t);
    canvas.line(to_x(t), bottom, to_x(t), bottom + 5, axis);
    canvas.text(label, to_x(t) - scaled_width(label) / 2, bottom + 9, axis);
  }
  const std::string title = upper(x_label);
  canvas.text(title, (left + right - scaled_width(title)) / 2, bottom + 15 + kCharHeight, axis);
  for (const auto& s : panel.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i + 1 < n; ++i)
      if (std::isfinite(s.y[i]) && std::isfinite(s.y[i + 1]))
        canvas.line(to_x(s.x[i]), to_y(s.y[i]), to_x(s.x[i + 1]), to_y(s.y[i + 1]), s.rgb);
    // Markers, and a lone point (one step or one epoch) that no line would show.
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(s.y[i]) && (s.markers || n == 1)) canvas.block(to_x(s.x[i]) - 3, to_y(s.y[i]) - 3, 7, s.rgb);
  }
}

}  // namespace

void write_curves_png(const std::string& path, const std::vector<Panel>& panels, const std::string& x_label, int width,
                      int panel_height) {
  Canvas canvas(width, panel_height * static_cast<int>(panels.size()));
  for (size_t p = 0; p < panels.size(); ++p)
    draw_panel(canvas, static_cast<int>(p) * panel_height, panel_height, panels[p], x_label);
  Tensor image = from_vector<uint8_t>(canvas.px, {3, canvas.h, canvas.w});
  data::write_png(path, image);
}

}  // namespace qflow::viz
