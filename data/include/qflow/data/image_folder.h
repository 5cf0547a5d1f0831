#pragma once
// A folder of PNG images, one sub-folder per class (torchvision's ImageFolder layout):
//   root/cat/001.png, root/cat/x/002.png, root/dog/003.png, ...
#include <string>
#include <vector>

#include "qflow/data/dataset.h"
#include "qflow/data/png.h"

namespace qflow::data {

struct ImageFolderOptions {
  /// Channels every image is decoded to; RGB (like torchvision's default loader) keeps a
  /// batch of mixed gray/RGB/RGBA/palette files collatable.
  PngChannels channels = PngChannels::RGB;
};

/// Classes are the sorted names of root's sub-folders (hidden ones, starting with '.', are
/// skipped); samples are the .png files below each (searched recursively, any letter case),
/// sorted by path. Other files are ignored. Images are decoded on every get() — the dataset
/// holds paths only — so a broken file fails when it is read, naming the file.
class ImageFolder final : public Dataset {
 public:
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Example get(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }

  struct Sample {
    std::string path;
    int64_t label;
  };
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
};

}  // namespace qflow::data
