// Training curves (tools/viz/curve_plot.h): what a panel draws, decoded from the PNG.
#include <gtest/gtest.h>

#include <array>

#include "data/test_files.h"
#include "viz/curve_plot.h"

using namespace qflow;
using namespace qflow::data::testing;
using qflow::viz::Panel;
using qflow::viz::Series;

namespace {

class CurvePlotTest : public TempDirTest {
 protected:
  // Writes the panels and decodes them again.
  Tensor draw(const std::vector<Panel>& panels) {
    viz::write_curves_png(path("curves.png"), panels, "optimizer step", 480, 240);
    return data::read_png(path("curves.png"));
  }
};

constexpr std::array<uint8_t, 3> kBlue = {31, 119, 180};

Series blue(std::vector<double> x, std::vector<double> y, bool markers = false) {
  return Series{.name = "train loss", .x = std::move(x), .y = std::move(y), .rgb = {31, 119, 180}, .markers = markers};
}

std::array<uint8_t, 3> pixel(const Tensor& image, int64_t x, int64_t y) {
  const int64_t h = image.sizes()[1], w = image.sizes()[2];
  const uint8_t* p = image.data_ptr<uint8_t>();
  return {p[(0 * h + y) * w + x], p[(1 * h + y) * w + x], p[(2 * h + y) * w + x]};
}

// Pixels of `rgb` below the legends (the first 30 rows of each 240-row panel name the series
// in their colours).
int64_t plotted(const Tensor& image, std::array<uint8_t, 3> rgb) {
  int64_t n = 0;
  for (int64_t y = 0; y < image.sizes()[1]; ++y)
    for (int64_t x = 0; x < image.sizes()[2]; ++x) n += y % 240 >= 30 && pixel(image, x, y) == rgb;
  return n;
}

TEST_F(CurvePlotTest, ALonePointIsDrawnAsAMarker) {
  // One step of one epoch: no line to draw, so the point is a 7x7 block.
  const Tensor image = draw({Panel{"loss", {blue({1}, {2.3})}}});
  EXPECT_EQ(image.sizes(), (std::vector<int64_t>{3, 240, 480}));
  EXPECT_EQ(plotted(image, kBlue), 49);
}

TEST_F(CurvePlotTest, PointsAreJoinedAcrossThePlotWidth) {
  const Tensor image = draw({Panel{"loss", {blue({1, 2, 3, 4}, {2.3, 1.9, 1.2, 0.8})}}});
  // A 2-pixel line from the left axis to the right edge: at least 2 pixels per column crossed.
  EXPECT_GT(plotted(image, kBlue), 2 * 300);
  // Its ends are the first point (top left of the plot) and the last (bottom right).
  int64_t first_column = image.sizes()[2], last_column = 0;
  for (int64_t y = 30; y < image.sizes()[1]; ++y)
    for (int64_t x = 0; x < image.sizes()[2]; ++x)
      if (pixel(image, x, y) == kBlue) first_column = std::min(first_column, x), last_column = std::max(last_column, x);
  EXPECT_LT(first_column, 120);
  EXPECT_GE(last_column, 480 - 24 - 1);
}

TEST_F(CurvePlotTest, AnEmptyPanelDrawsItsAxesAndLegendOnly) {
  const Tensor image = draw({Panel{"loss", {blue({}, {})}}, Panel{"accuracy %", {blue({}, {})}}});
  EXPECT_EQ(image.sizes(), (std::vector<int64_t>{3, 480, 480}));
  EXPECT_EQ(plotted(image, kBlue), 0);
  EXPECT_GT(plotted(image, {70, 70, 70}), 2 * 400);  // both panels' axes
  // The legend names the series in its colour, in glyphs drawn at twice the font's size: the
  // 'T' of "TRAIN LOSS" begins with a top bar of 5 x 2 = 10 pixels, 2 rows thick.
  int64_t top = -1, left = -1;
  for (int64_t y = 0; y < 30 && top < 0; ++y)
    for (int64_t x = 0; x < 480 && top < 0; ++x)
      if (pixel(image, x, y) == kBlue) top = y, left = x;
  ASSERT_GE(top, 0);
  for (int64_t dy = 0; dy < 2; ++dy)
    for (int64_t dx = 0; dx < 10; ++dx) EXPECT_EQ(pixel(image, left + dx, top + dy), kBlue) << dx << ", " << dy;
  EXPECT_NE(pixel(image, left + 10, top), kBlue);
  EXPECT_NE(pixel(image, left, top + 2), kBlue);  // the T's stem is in its middle columns
}

}  // namespace
