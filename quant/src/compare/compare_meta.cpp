// annotate_sqnr, sqnr_legend: the numeric debugger's picture (compare.h).
#include "qflow/quant/compare.h"

namespace qflow::quant {
namespace {

// Bands of end-to-end SQNR. Uniform b-bit rounding of a full-range signal gives about
// 6.02·b + 1.76 dB: ~50 dB at 8 bits, ~26 dB at 4. A good int8 layer lands at 35-45 dB
// (activations do not fill their range), and 30 dB is an RMS error of 3 % of the signal:
// green. 20 dB (10 %) is what 4-bit layers reach at best: yellow. 10 dB is an error a third
// of the signal (orange between); below it the output is mostly error: red.
struct Band {
  double min_db;
  const char* colour;  // fill
  const char* name;
};
constexpr Band kBands[] = {
    {30, "#b7e1a1", "green"},
    {20, "#fff2a8", "yellow"},
    {10, "#f9c68f", "orange"},
    {-1e308, "#f4a6a6", "red"},
};

const Band& band_of(double sqnr_db) {
  for (const Band& b : kBands)
    if (sqnr_db >= b.min_db) return b;
  return kBands[3];  // NaN
}

std::string db(double v) { return fmt::format("{:.1f} dB", v); }

}  // namespace

std::string sqnr_legend() {
  return fmt::format("{} >= {:.0f} dB, {} {:.0f}-{:.0f}, {} {:.0f}-{:.0f}, {} < {:.0f}", kBands[0].name,
                     kBands[0].min_db, kBands[1].name, kBands[1].min_db, kBands[0].min_db, kBands[2].name,
                     kBands[2].min_db, kBands[1].min_db, kBands[3].name, kBands[2].min_db);
}

void annotate_sqnr(fx::GraphModule& quantized_model, const Comparison& comparison) {
  for (const NodeComparison& r : comparison.nodes) {
    fx::Node& n = quantized_model.graph().node(r.node);
    std::string caption = "SQNR " + db(r.sqnr_db) + " (alone " + db(r.local_sqnr_db) + ")";
    if (r.weight_sqnr_db) caption += ", weight " + db(*r.weight_sqnr_db);
    // A deployed layer's kernel caption ("runs int8", Note [Quant node meta]) stays, above; the
    // numbers of an earlier annotate_sqnr go.
    if (const fx::MetaValue* kernel = n.meta().find("dot.caption"))
      if (const auto* text = std::get_if<std::string>(kernel)) {
        const std::string before = text->substr(0, text->find("SQNR "));
        if (!before.empty()) caption = before + (before.back() == '\n' ? "" : "\n") + caption;
      }
    n.meta().set("dot.caption", caption);
    n.meta().set("dot.fillcolor", std::string(band_of(r.sqnr_db).colour));
  }
}

}  // namespace qflow::quant
