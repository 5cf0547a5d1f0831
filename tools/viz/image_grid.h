#pragma once
// A batch of images composed into one labelled picture, for looking at the data
// (qflow-show-data).
#include <string>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::viz {

struct ImageGridOptions {
  /// Images per row.
  int64_t columns = 8;
  /// Integer upscaling of every image; 0 picks one that makes the images at least 64 pixels.
  int64_t scale = 0;
  /// Undo a Normalize on float images (x * std + mean) before display; empty: none.
  std::vector<double> mean = {}, std = {};
};

/// Composes images (N, C, H, W) into an RGB (3, H', W') uint8 picture.
///
/// Labels are drawn without a font dependency: under each image a band in its class's colour
/// (the ten "tab10" colours, cycled) carrying the label index — and as much of the class name
/// as fits — in a built-in 5x7 bitmap font; below the grid a legend lists every class shown
/// with its colour, index and name (upper-cased; characters outside A-Z, 0-9 and a little
/// punctuation print as '?'). uint8 images are shown as they are; float images are taken to be
/// in [0, 1] after undoing `mean`/`std`, and clamped. 1-channel images are shown gray; an
/// alpha channel is ignored. `labels` (N) int64 may be undefined: no bands, no legend.
Tensor make_image_grid(const Tensor& images, const Tensor& labels, const std::vector<std::string>& class_names,
                       const ImageGridOptions& options = {});

/// make_image_grid written as a PNG.
void write_image_grid(const std::string& path, const Tensor& images, const Tensor& labels,
                      const std::vector<std::string>& class_names, const ImageGridOptions& options = {});
/// write_image_grid with `columns` images per row and the other options at their defaults.
void write_image_grid(const std::string& path, const Tensor& images, const Tensor& labels,
                      const std::vector<std::string>& class_names, int64_t columns);

}  // namespace qflow::viz
