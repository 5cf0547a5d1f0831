#include "quant_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "qflow/nn/serialize.h"
#include "run_log.h"

namespace qflow::tools {

namespace {

std::string percent_or_dash(const std::optional<double>& v) { return v ? fmt::format("{:.2f}%", *v) : "-"; }

// One row's cells, in the table's column order.
std::vector<std::string> cells_of(const std::string& model, const ResultRow& r) {
  const auto& q = r.qconfig;
  // W4A8 where the activations have bits of their own (Note [Weight and activation bits]).
  const std::string bits = !q                                                      ? "32"
                           : q->activation_bits && *q->activation_bits != q->bits ? fmt::format("W{}A{}", q->bits, *q->activation_bits)
                                                                                  : std::to_string(q->bits);
  return {model, r.stage, bits, q ? std::string(quant::to_string(q->scheme)) : "-",
          q ? std::string(quant::to_string(q->formula)) : "-", q ? (q->per_layer ? "yes" : "no") : "-",
          fmt::format("{:.2f}%", r.accuracy), percent_or_dash(r.simulated_accuracy), percent_or_dash(r.same_argmax)};
}

}  // namespace

ResultRow integer_row(const std::string& stage, const std::optional<quant::QConfig>& qconfig, const IntegerAgreement& a) {
  return {integer_stage(stage, a), qconfig, a.integer_accuracy, a.simulated_accuracy, a.same_argmax};
}

std::string results_table(const std::string& model, const std::vector<ResultRow>& rows) {
  std::vector<std::vector<std::string>> cells{
      {"model", "stage", "bits", "scheme", "formula", "per-layer", "accuracy", "float simulation", "same argmax"}};
  for (const ResultRow& r : rows) cells.push_back(cells_of(model, r));
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

void write_results(const std::string& dir, const std::string& model, const std::vector<ResultRow>& rows,
                   int64_t test_images) {
  // Plain numbers (no "%"), "" where a row has no such figure.
  const auto number = [](const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : std::string(); };
  std::string csv = "model,stage,bits,scheme,formula,per_layer,accuracy,simulated_accuracy,same_argmax,test_images\n";
  for (const ResultRow& r : rows) {
    const std::vector<std::string> c = cells_of(model, r);
    csv += fmt::format("{},{},{},{},{},{},{:.4f},{},{},{}\n", c[0], c[1], c[2], c[3], c[4], c[5], r.accuracy,
                       number(r.simulated_accuracy), number(r.same_argmax), test_images);
  }
  std::filesystem::create_directories(dir);
  replace_file((std::filesystem::path(dir) / "results.csv").string(), csv);
  replace_file((std::filesystem::path(dir) / "results.md").string(), results_table(model, rows));
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
