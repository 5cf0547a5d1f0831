// Graph printing: torch.fx's text form and print_tabular's table.
#include <array>

#include "qflow/fx/graph.h"

namespace qflow::fx {

std::string Graph::to_string() const {
  std::string s = "graph():";
  for (const Node* n : *this) s += "\n    " + n->format();
  return s + "\n";
}

std::string Graph::print_tabular() const {
  // The layout of Python's tabulate "simple" format, which torch.fx's print_tabular uses.
  using Row = std::array<std::string, 5>;
  std::vector<Row> rows{{"opcode", "name", "target", "args", "kwargs"}};
  for (const Node* n : *this) {
    rows.push_back({std::string(op_name(n->op())), n->name(), n->target(), format_arguments(n->args()),
                    format_kwargs(n->kwargs())});
  }
  std::array<size_t, 5> width{};
  for (const Row& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const Row& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      out += r[c];
      if (c + 1 < r.size()) out += std::string(width[c] - r[c].size() + 2, ' ');
    }
    return out + "\n";
  };
  std::string s = line(rows[0]);
  for (size_t c = 0; c < width.size(); ++c) s += std::string(width[c], '-') + (c + 1 < width.size() ? "  " : "\n");
  for (size_t i = 1; i < rows.size(); ++i) s += line(rows[i]);
  return s;
}

}  // namespace qflow::fx
