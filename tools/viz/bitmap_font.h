#pragma once
// A built-in 5x7 bitmap font (digits, upper-case letters, a little punctuation) for labels
// in image grids and the tools' plots: the tools need no font dependency, and labels only need
// to be legible.
#include <cstdint>
#include <string_view>

namespace qflow::viz {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
/// Horizontal advance per character (glyph + one column of space).
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;

/// The 7 rows of `c` (bit 4 = leftmost column). Lower case maps to upper case; characters
/// the font lacks map to '?'.
const uint8_t* glyph(char c);

/// Width in pixels of `text` drawn in one line (no trailing space column).
inline int text_width(std::string_view text) {
  return text.empty() ? 0 : static_cast<int>(text.size()) * kGlyphAdvance - 1;
}

/// Calls set(x, y) for every lit pixel of `text` drawn with its top-left corner at (x, y).
template <typename SetPixel>
void draw_text(std::string_view text, int x, int y, SetPixel&& set) {
  for (char c : text) {
    const uint8_t* rows = glyph(c);
    for (int r = 0; r < kGlyphHeight; ++r)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (rows[r] & (0x10 >> col)) set(x + col, y + r);
    x += kGlyphAdvance;
  }
}

}  // namespace qflow::viz
