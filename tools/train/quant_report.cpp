#include "quant_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "qflow/nn/serialize.h"

namespace qflow::tools {

std::string results_table(const std::string& model, const std::vector<ResultRow>& rows) {
  std::vector<std::vector<std::string>> cells{{"model", "stage", "bits", "scheme", "formula", "per-layer", "accuracy"}};
  for (const ResultRow& r : rows) {
    const auto& q = r.qconfig;
    cells.push_back({model, r.stage, q ? std::to_string(q->bits) : "32", q ? std::string(quant::to_string(q->scheme)) : "-",
                     q ? std::string(quant::to_string(q->formula)) : "-", q ? (q->per_layer ? "yes" : "no") : "-",
                     fmt::format("{:.2f}%", r.accuracy)});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& row) {
    std::string s = "|";
    for (size_t c = 0; c < row.size(); ++c) s += fmt::format(" {:<{}} |", row[c], width[c]);
    return s + "\n";
  };
  std::string out = line(cells[0]);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (size_t i = 1; i < cells.size(); ++i) out += line(cells[i]);
  return out;
}

void load_float_weights(nn::Module& model, const std::string& path) {
  const nn::StateDict file = nn::load(path);
  const std::string prefix = "model.";
  bool checkpoint = false;
  for (const std::string& key : file.keys())
    if (key.rfind("optimizer.", 0) == 0 || key.rfind("progress.", 0) == 0) checkpoint = true;
  if (!checkpoint) {
    model.load_state_dict(file);
    return;
  }
  nn::StateDict weights;
  for (const auto& [key, t] : file)
    if (key.rfind(prefix, 0) == 0) weights.insert(key.substr(prefix.size()), t);
  model.load_state_dict(weights);
}

}  // namespace qflow::tools
