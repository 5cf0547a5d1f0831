// ImageFolder: class discovery, mixed PNG colour types, broken files.
#include "test_files.h"

using namespace qflow;
using namespace qflow::data;
using namespace qflow::data::testing;
using ::testing::HasSubstr;

namespace {

class ImageFolderTest : public TempDirTest {
 protected:
  void write_gray(const std::string& rel, uint8_t v) {
    write_bytes(path(rel), encode_png({.width = 2, .height = 2, .color_type = PNG_COLOR_TYPE_GRAY, .rows = Bytes(4, v)}));
  }
};

TEST_F(ImageFolderTest, ClassesAreSortedFoldersAndSamplesSortedFiles) {
  write_gray("zebra/b.png", 1);
  write_gray("zebra/a.PNG", 2);
  write_gray("ant/deep/er/x.png", 3);
  write_bytes(path("ant/notes.txt"), text_bytes("ignored"));
  write_gray(".cache/hidden.png", 4);
  write_gray("ant/.hidden/y.png", 5);
  ImageFolder ds(dir_.string());
  EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"ant", "zebra"}));
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.samples()[0].path, path("ant/deep/er/x.png"));
  EXPECT_EQ(ds.samples()[1].path, path("zebra/a.PNG"));
  const Example ex = ds.get(1);
  EXPECT_EQ(ex.label, 1);
  EXPECT_EQ(ex.image.sizes(), (std::vector<int64_t>{3, 2, 2}));  // RGB by default
  EXPECT_EQ(to_vector<uint8_t>(ex.image), std::vector<uint8_t>(12, 2));
  EXPECT_EQ(ds.get(0).label, 0);
}

TEST_F(ImageFolderTest, MixedColourTypesLoadToOneChannelCount) {
  write_gray("a/gray.png", 10);
  write_bytes(path("a/rgba.png"),
              encode_png({.width = 2, .height = 2, .color_type = PNG_COLOR_TYPE_RGB_ALPHA, .rows = Bytes(16, 20)}));
  write_bytes(path("a/palette.png"), encode_png({.width = 2, .height = 2, .color_type = PNG_COLOR_TYPE_PALETTE,
                                                 .palette = {{1, 2, 3}}, .rows = Bytes(4, 0)}));
  write_bytes(path("a/sixteen.png"),
              encode_png({.width = 2, .height = 2, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 16, .rows = Bytes(8, 0xff)}));
  ImageFolder ds(dir_.string());
  auto loader = DataLoader(std::make_shared<ImageFolder>(dir_.string()), {.batch_size = 4});
  for (Batch& b : loader) EXPECT_EQ(b.images.sizes(), (std::vector<int64_t>{4, 3, 2, 2}));
  EXPECT_EQ(to_vector<uint8_t>(ds.get(0).image), (std::vector<uint8_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}));
  EXPECT_EQ(to_vector<uint8_t>(ds.get(1).image), (std::vector<uint8_t>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  ImageFolder gray(dir_.string(), {.channels = PngChannels::Gray});
  EXPECT_EQ(gray.get(3).image.sizes(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(to_vector<uint8_t>(gray.get(3).image), std::vector<uint8_t>(4, 255));
}

TEST_F(ImageFolderTest, BrokenFileFailsWhenReadNamingIt) {
  write_gray("a/good.png", 1);
  write_bytes(path("a/broken.png"), text_bytes("not a png"));
  ImageFolder ds(dir_.string());
  EXPECT_THAT(error_of([&] { ds.get(0); }), HasSubstr(path("a/broken.png") + ": invalid PNG: libpng:"));
  EXPECT_EQ(ds.get(1).label, 0);
}

TEST_F(ImageFolderTest, MissingOrEmptyFoldersAreErrors) {
  EXPECT_EQ(error_of([&] { ImageFolder(path("nothing")); }), fmt::format("ImageFolder: {} is not a directory", path("nothing")));
  EXPECT_EQ(error_of([&] { ImageFolder(dir_.string()); }), fmt::format("ImageFolder: {} has no class sub-folders", dir_.string()));
  write_gray("cats/1.png", 1);
  fs::create_directories(path("dogs"));
  EXPECT_EQ(error_of([&] { ImageFolder(dir_.string()); }),
            fmt::format("ImageFolder: no .png files for class(es) [\"dogs\"] in {}", dir_.string()));
}

}  // namespace
