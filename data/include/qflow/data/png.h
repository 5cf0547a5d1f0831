#pragma once
// PNG images through libpng: decoding every colour type and bit depth to 8-bit (C, H, W)
// tensors, and writing them back.
#include <cstdint>
#include <span>
#include <string>

#include "qflow/core/tensor.h"

namespace qflow::data {

/// The channels a decoded image gets.
enum class PngChannels {
  Native,  ///< As stored: gray 1, gray+alpha 2, RGB 3, RGBA 4 (palette -> RGB or RGBA).
  Gray,    ///< 1 channel (colour converted with the ITU-R BT.709 weights libpng uses).
  RGB,     ///< 3 channels (gray replicated, alpha dropped — what PIL's convert("RGB") does).
  RGBA,    ///< 4 channels (opaque alpha added when the image has none).
};

/// Decodes the PNG file `path` to a (C, H, W) uint8 tensor. Palette images are expanded,
/// 1/2/4-bit gray is scaled to 0..255, a tRNS chunk becomes an alpha channel, and 16-bit
/// samples are scaled to 8 bits with rounding (libpng's png_set_scale_16: v * 255 / 65535).
/// A file libpng rejects throws qflow::Error naming the file, libpng's reason and the byte
/// offset reached.
Tensor read_png(const std::string& path, PngChannels channels = PngChannels::Native);

/// decode_png on bytes already in memory; `name` is what error messages call them.
Tensor decode_png(std::span<const uint8_t> bytes, const std::string& name, PngChannels channels = PngChannels::Native);

/// Writes a uint8 image, (C, H, W) with C = 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA),
/// or (H, W) gray, as an 8-bit PNG. The file appears atomically (temp file + rename).
void write_png(const std::string& path, const Tensor& image);

}  // namespace qflow::data
