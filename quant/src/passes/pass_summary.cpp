#include <algorithm>

#include "qflow/quant/passes.h"

namespace qflow::quant {

int64_t PassSummary::count(const std::string& type) const {
  auto it = counts.find(type);
  return it == counts.end() ? 0 : it->second;
}

std::string PassSummary::to_string() const {
  const std::vector<std::string> header{"node", "from", "to", "module", "qconfig"};
  const auto qconfig_cell = [this](const std::optional<QConfig>& qc) {
    return qc && qc == mapping.global() ? std::string("global") : quant::to_string(qc);
  };
  std::vector<std::vector<std::string>> rows;
  for (const auto* list : {&replaced, &left_float})
    for (const Replacement& r : *list)
      rows.push_back({r.node, r.from, r.to, r.folded.empty() ? r.path : fmt::format("{} ({} folded)", r.path, r.folded),
                      qconfig_cell(r.qconfig)});
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = " ";
    for (size_t c = 0; c < cells.size(); ++c)
      s += fmt::format(" {:<{}}", cells[c], c + 1 == cells.size() ? 0 : width[c]);
    return s + "\n";
  };
  std::string out = fmt::format("{}: {}\n", pass, quant::to_string(mapping.global()));
  for (const QConfigRule& r : mapping.rules())
    out += fmt::format("  rule {} '{}': {}\n", quant::to_string(r.kind), r.pattern, quant::to_string(r.qconfig));
  out += line(header);
  for (const auto& row : rows) out += line(row);
  std::vector<std::string> totals;
  for (const auto& [type, n] : counts) totals.push_back(fmt::format("{} {}", n, type));
  out += fmt::format("  {} replaced ({}); {} BatchNorm2d folded, {} left", replaced.size(),
                     totals.empty() ? "nothing" : fmt::format("{}", fmt::join(totals, ", ")), batchnorm_folded,
                     batchnorm_left);
  if (conv_left + linear_left > 0)
    out += fmt::format("; {} Conv2d and {} Linear left in float{}", conv_left, linear_left,
                       left_float.empty() ? "" : " (by the QConfig mapping)");
  if (pass == "dequantization_aware_training") {
    out += fmt::format("; {} layers run int8", integer_layers);
    if (!float_layers.empty())
      out += fmt::format(", {} the float simulation:\n    {}", float_layers.size(), fmt::join(float_layers, "\n    "));
  }
  return out + "\n";
}

}  // namespace qflow::quant
