#pragma once
// Training curves as a PNG: panels stacked vertically (loss, accuracy), each with a title on
// its y axis, a legend, value labels and a labelled x axis, in data's bitmap font drawn at
// twice its size so the text reads at a glance.
#include <string>
#include <vector>

namespace qflow::viz {

struct Series {
  std::string name;
  /// Points (x[i], y[i]); non-finite y values are gaps.
  std::vector<double> x, y;
  unsigned char rgb[3];
  /// Mark every point with a dot (sparse series, e.g. one test result per epoch).
  bool markers = false;
};

struct Panel {
  std::string y_label;  // e.g. "LOSS"
  std::vector<Series> series;
};

/// Writes `panels` stacked vertically; each panel scales its own x and y ranges. A panel
/// without points draws its axes and legend only.
void write_curves_png(const std::string& path, const std::vector<Panel>& panels, const std::string& x_label,
                      int width = 960, int panel_height = 360);

}  // namespace qflow::viz
