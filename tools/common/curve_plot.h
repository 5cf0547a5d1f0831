#pragma once
// Training curves as a PNG: one panel per series group (loss, accuracy), epochs on x, labelled
// with data's bitmap font (series names, y values, epoch numbers).
#include <string>
#include <vector>

namespace qflow::tools {

struct Series {
  std::string name;
  std::vector<double> values;
  unsigned char rgb[3];
};

/// Writes panels stacked vertically; each panel scales its own y range. values[i] is epoch i + 1.
void write_curves_png(const std::string& path, const std::vector<std::vector<Series>>& panels, int width = 640,
                      int panel_height = 240);

}  // namespace qflow::tools
