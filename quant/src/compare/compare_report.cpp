// Comparison's lookups and printouts: see compare.h.
#include <algorithm>
#include <array>

#include "qflow/quant/compare.h"

namespace qflow::quant {
namespace {

// A decibel figure as printed: "34.21", "inf", "-inf".
std::string db(double v) { return fmt::format("{:.2f}", v); }

}  // namespace

const NodeComparison& Comparison::at(const std::string& node) const {
  for (const NodeComparison& r : nodes)
    if (r.node == node) return r;
  QFLOW_FAIL("quant::compare: %{} is not a compared node (rows: {}; skipped: {})", node, nodes.size(),
             skipped.empty() ? "none" : fmt::format("{}", fmt::join(skipped, "; ")));
}

std::vector<NodeComparison> Comparison::worst(size_t n) const {
  std::vector<NodeComparison> rows = nodes;
  std::stable_sort(rows.begin(), rows.end(), [](const NodeComparison& a, const NodeComparison& b) {
    if (a.local_sqnr_db != b.local_sqnr_db) return a.local_sqnr_db < b.local_sqnr_db;
    return a.sqnr_db < b.sqnr_db;
  });
  rows.resize(std::min(n, rows.size()));
  return rows;
}

std::string Comparison::to_csv() const {
  std::string s = "node,reference,what,elements,sqnr_db,cosine,max_abs_error,local_sqnr_db,weight_sqnr_db\n";
  for (const NodeComparison& r : nodes)
    s += fmt::format("{},{},\"{}\",{},{:.6g},{:.9g},{:.6g},{:.6g},{}\n", r.node, r.reference, r.what, r.elements,
                     r.sqnr_db, r.cosine, r.max_abs_error, r.local_sqnr_db,
                     r.weight_sqnr_db ? fmt::format("{:.6g}", *r.weight_sqnr_db) : "");
  return s;
}

std::string Comparison::table(size_t n) const {
  const std::vector<NodeComparison> rows = worst(n);
  std::vector<std::array<std::string, 7>> cells{
      {"node", "module / op", "alone dB", "SQNR dB", "cosine", "max |err|", "weight dB"}};
  for (const NodeComparison& r : rows)
    cells.push_back({r.node, r.what, db(r.local_sqnr_db), db(r.sqnr_db), fmt::format("{:.6f}", r.cosine),
                     fmt::format("{:.4g}", r.max_abs_error), r.weight_sqnr_db ? db(*r.weight_sqnr_db) : "-"});
  std::array<size_t, 7> width{};
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string s = fmt::format(
      "the {} of {} nodes with the lowest SQNR alone (fed the float model's inputs); SQNR, cosine and max |err| end "
      "to end; over {} batch{}\n",
      rows.size(), nodes.size(), batches, batches == 1 ? "" : "es");
  for (const auto& row : cells) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)  // text columns left-aligned, numbers right-aligned
      line += i < 2 ? fmt::format("{:<{}}  ", row[i], width[i]) : fmt::format("{:>{}}  ", row[i], width[i]);
    line.erase(line.find_last_not_of(' ') + 1);
    s += line + "\n";
  }
  return s;
}

}  // namespace qflow::quant
