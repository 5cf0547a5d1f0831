#pragma once
// to_dot: a Graph as Graphviz text (render with `dot -Tsvg graph.dot -o graph.svg`).
//
// Each node is a box labelled with its name and what it does; the kind sets shape and colour:
//   placeholder   green ellipse      get_attr      grey note
//   call_module   blue rounded box, with the module type (Conv2d) when an owner is known
//   call_function yellow box         call_method   orange box       output  red ellipse
// Below come the output sizes and dtype from meta (filled by tracing or ShapeProp) and the
// node's "quant.*" meta entries (bits, scheme, scale, ...), which also give the node a thick
// red border, then any other meta entries. Entries under "dot." are drawing instructions
// rather than text: "dot.fillcolor" replaces the node's fill colour and "dot.caption" adds a
// last line (quant::annotate_quant_meta marks a deployed layer's int8 or float kernel with
// them). Edges follow data flow.
#include <string>

#include "qflow/fx/graph.h"

namespace qflow::fx {

class GraphModule;

struct DotOptions {
  /// Graph label at the top; empty for none.
  std::string title;
  /// Module whose submodules call_module targets name (for the module type line).
  const nn::Module* owner = nullptr;
  bool show_shapes = true;
  /// Show meta's extra entries (quant info and the rest).
  bool show_meta = true;
  /// Show constant (non-node) arguments, e.g. "args: -1, 1".
  bool show_constants = false;
  /// "TB" (top to bottom) or "LR".
  std::string rankdir = "TB";
};

std::string to_dot(const Graph& graph, const DotOptions& options = {});
/// to_dot of gm's graph with gm as owner (module types) and its type name as default title.
std::string to_dot(const GraphModule& gm, DotOptions options = {});

}  // namespace qflow::fx
