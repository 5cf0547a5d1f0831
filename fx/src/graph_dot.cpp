// to_dot: Graphviz rendering of a graph. See qflow/fx/graph_dot.h for the legend.
#include "qflow/fx/graph_dot.h"

#include "qflow/fx/graph_module.h"

namespace qflow::fx {

namespace {

struct Style {
  const char* shape;
  const char* style;
  const char* fill;
};

Style style_of(NodeOp op) {
  switch (op) {
    case NodeOp::Placeholder: return {"ellipse", "filled", "#d5e8d4"};
    case NodeOp::GetAttr: return {"note", "filled", "#eeeeee"};
    case NodeOp::CallModule: return {"box", "rounded,filled", "#dae8fc"};
    case NodeOp::CallFunction: return {"box", "filled", "#fff2cc"};
    case NodeOp::CallMethod: return {"box", "filled", "#ffe6cc"};
    case NodeOp::Output: return {"ellipse", "filled", "#f8cecc"};
  }
  return {"box", "filled", "#ffffff"};
}

// Escapes text for a double-quoted DOT string; "\n" in `s` becomes a centred line break.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string meta_text(const MetaValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{:.6g}", *d);
  return std::get<std::string>(v);
}

std::string shapes_text(const NodeMeta& meta) {
  std::vector<std::string> parts;
  for (const TensorMeta& m : meta.outputs) parts.push_back(fmt::format("[{}] {}", fmt::join(m.sizes, ", "), m.dtype));
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string module_type(const nn::Module* owner, const std::string& path) {
  if (owner == nullptr) return "";
  try {
    return owner->get_submodule(path)->type_name();
  } catch (const Error&) {
    return "";
  }
}

std::string label_of(const Node& n, const DotOptions& o, bool& quantized) {
  std::vector<std::string> lines{n.name()};
  switch (n.op()) {
    case NodeOp::Placeholder: lines.push_back("input"); break;
    case NodeOp::Output: break;
    case NodeOp::GetAttr: lines.push_back("get_attr " + n.target()); break;
    case NodeOp::CallModule: {
      const std::string type = module_type(o.owner, n.target());
      lines.push_back(type.empty() ? n.target() : type + " (" + n.target() + ")");
      break;
    }
    default: lines.push_back(std::string(op_name(n.op())) + " " + n.target()); break;
  }
  if (o.show_constants) {
    std::vector<std::string> constants;
    for (const Argument& a : n.args())
      if (!a.is_node() && !a.is_node_list()) constants.push_back(format_argument(a));
    for (const auto& [k, a] : n.kwargs())
      if (!a.is_node() && !a.is_node_list()) constants.push_back(k + "=" + format_argument(a));
    if (!constants.empty()) lines.push_back(fmt::format("{}", fmt::join(constants, ", ")));
  }
  if (o.show_shapes && n.meta().has_shape()) lines.push_back(shapes_text(n.meta()));
  if (o.show_meta) {
    std::vector<std::string> quant, other;
    for (const auto& [k, v] : n.meta().extra) {
      if (k.rfind("dot.", 0) == 0) continue;  // drawing instructions, not text
      if (k.rfind("quant.", 0) == 0) quant.push_back(k.substr(6) + "=" + meta_text(v));
      else other.push_back(k + "=" + meta_text(v));
    }
    quantized = !quant.empty();
    if (!quant.empty()) lines.push_back(fmt::format("{}", fmt::join(quant, " ")));
    if (!other.empty()) lines.push_back(fmt::format("{}", fmt::join(other, " ")));
    if (const auto* caption = n.meta().find("dot.caption")) lines.push_back(meta_text(*caption));
  }
  return fmt::format("{}", fmt::join(lines, "\n"));
}

}  // namespace

std::string to_dot(const Graph& graph, const DotOptions& o) {
  std::string s = "digraph G {\n";
  s += fmt::format("  graph [rankdir={}, fontname=\"Helvetica\", fontsize=12{}];\n", quote(o.rankdir),
                   o.title.empty() ? "" : ", labelloc=t, label=" + quote(o.title));
  s += "  node [fontname=\"Helvetica\", fontsize=10];\n";
  s += "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";
  for (const Node* n : graph) {
    Style st = style_of(n->op());
    bool quantized = false;
    const std::string label = label_of(*n, o, quantized);
    const auto* fill = o.show_meta ? n->meta().find("dot.fillcolor") : nullptr;
    const std::string fill_text = fill ? meta_text(*fill) : st.fill;
    st.fill = fill_text.c_str();
    s += fmt::format("  {} [shape={}, style={}, fillcolor={}, label={}{}];\n", quote(n->name()), st.shape, quote(st.style),
                     quote(st.fill), quote(label), quantized ? ", color=\"#b85450\", penwidth=2.5" : "");
  }
  for (const Node* n : graph)
    for (const Node* in : n->all_input_nodes()) s += fmt::format("  {} -> {};\n", quote(in->name()), quote(n->name()));
  return s + "}\n";
}

std::string to_dot(const GraphModule& gm, DotOptions options) {
  if (options.owner == nullptr) options.owner = &gm;
  if (options.title.empty()) options.title = gm.type_name();
  return to_dot(gm.graph(), options);
}

}  // namespace qflow::fx
