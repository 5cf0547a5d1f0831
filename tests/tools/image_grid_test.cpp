// Image grids: layout, label bands and the bitmap font, written as PNG.
#include "data/test_files.h"
#include "viz/image_grid.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using namespace qflow::viz;
using ::testing::HasSubstr;

namespace {

class ImageGridTest : public TempDirTest {};

std::array<uint8_t, 3> pixel(const Tensor& grid, int64_t x, int64_t y) {
  const int64_t h = grid.sizes()[1], w = grid.sizes()[2];
  const uint8_t* p = grid.data_ptr<uint8_t>();
  return {p[(0 * h + y) * w + x], p[(1 * h + y) * w + x], p[(2 * h + y) * w + x]};
}

TEST_F(ImageGridTest, LaysOutImagesBandsAndLegend) {
  // Five 4x4 images, 3 per row, scale 2: cells 8 wide, 8 + 11 tall, 2 px gaps.
  Tensor images = zeros({5, 3, 4, 4}, DType::UInt8);
  images.select(0, 1).fill_(200);
  const Tensor labels = from_vector<int64_t>({0, 1, 2, 1, 0}, {5});
  ImageGridOptions o;
  o.columns = 3;
  o.scale = 2;
  const Tensor grid = make_image_grid(images, labels, {"cat", "dog", "emu"}, o);
  // legend: 3 classes of 10 px below 2 rows of cells; the width fits a swatch and "0 CAT"
  EXPECT_EQ(grid.sizes(), (std::vector<int64_t>{3, 2 + 2 * (19 + 2) + 3 * 10 + 2, 2 * 2 + 6 * (5 + 2)}));
  EXPECT_EQ(pixel(grid, 0, 0), (std::array<uint8_t, 3>{24, 24, 24}));       // background
  EXPECT_EQ(pixel(grid, 2, 2), (std::array<uint8_t, 3>{0, 0, 0}));          // image 0
  EXPECT_EQ(pixel(grid, 12 + 7, 2 + 7), (std::array<uint8_t, 3>{200, 200, 200}));  // image 1, scaled
  EXPECT_EQ(pixel(grid, 12 + 7, 2 + 8 + 10), (std::array<uint8_t, 3>{255, 127, 14}));  // band of label 1 (tab10)
  // The digit "1" at the band's text origin (x0 + 2, band + 2), black on the light orange band:
  // its top row is 00100.
  EXPECT_EQ(pixel(grid, 12 + 2 + 2, 2 + 8 + 2), (std::array<uint8_t, 3>{0, 0, 0}));
  EXPECT_EQ(pixel(grid, 12 + 2 + 1, 2 + 8 + 2), (std::array<uint8_t, 3>{255, 127, 14}));
  // Legend swatch of class 2 (green), third legend line.
  EXPECT_EQ(pixel(grid, 3, 2 + 2 * 21 + 20 + 3), (std::array<uint8_t, 3>{44, 160, 44}));
}

TEST_F(ImageGridTest, FloatImagesAreUnnormalizedAndGrayIsReplicated) {
  Tensor images = full({1, 1, 2, 2}, 0.0);  // normalized 0 == mean 0.5
  ImageGridOptions o;
  o.scale = 1;
  o.mean = {0.5};
  o.std = {0.25};
  const Tensor grid = make_image_grid(images, Tensor(), {}, o);
  EXPECT_EQ(grid.sizes(), (std::vector<int64_t>{3, 2 + 2 + 2, 2 + 2 + 2}));  // no labels: no bands, no legend
  EXPECT_EQ(pixel(grid, 2, 2), (std::array<uint8_t, 3>{128, 128, 128}));
}

TEST_F(ImageGridTest, WritesTheGridAsPng) {
  Tensor images = randint(0, 256, {3, 3, 5, 5}, DType::UInt8);
  const Tensor labels = from_vector<int64_t>({2, 0, 1}, {3});
  const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover"};
  write_image_grid(path("grid.png"), images, labels, names, 2);
  ImageGridOptions o;
  o.columns = 2;
  EXPECT_EQ(to_vector<uint8_t>(read_png(path("grid.png"))), to_vector<uint8_t>(make_image_grid(images, labels, names, o)));
}

TEST_F(ImageGridTest, RejectsBadInput) {
  const Tensor images = zeros({2, 3, 4, 4}, DType::UInt8);
  EXPECT_EQ(error_of([&] { make_image_grid(images, from_vector<int64_t>({0, 3}, {2}), {"a", "b"}); }),
            "make_image_grid: label 3 outside the 2 class names");
  EXPECT_EQ(error_of([&] { make_image_grid(images, from_vector<int64_t>({0}, {1}), {}); }),
            "make_image_grid: expected 2 labels, got shape [1]");
  EXPECT_THAT(error_of([&] { make_image_grid(zeros({3, 4, 4}), Tensor(), {}); }),
              HasSubstr("expected images (N, C, H, W) with N >= 1, got shape [3, 4, 4]"));
  EXPECT_THAT(error_of([&] { make_image_grid(zeros({1, 5, 4, 4}), Tensor(), {}); }), HasSubstr("1 to 4 channels, got 5"));
}

}  // namespace
