// match_nodes: see Note [Numeric debugger] in compare.h.
#include "compare_match.h"

#include <algorithm>
#include <unordered_set>

namespace qflow::quant::detail {
namespace {

// The module types a float module of type `from` may have become in a quantized model.
bool quantized_form_of(const std::string& from, const std::string& to) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> forms{
      {"Conv2d", {"QConv2d", "QConvBN", "DConv2d"}},
      {"Linear", {"QLinear", "DLinear"}},
      {"QConvBN", {"DConv2d"}},
      {"QConv2d", {"DConv2d"}},
      {"QLinear", {"DLinear"}},
  };
  if (from == to) return true;
  for (const auto& [f, tos] : forms)
    if (f == from) return std::find(tos.begin(), tos.end(), to) != tos.end();
  return false;
}

bool is_quantized_layer(const std::string& type) {
  return type == "QConv2d" || type == "QConvBN" || type == "QLinear" || type == "DConv2d" || type == "DLinear";
}

std::string module_type(const fx::GraphModule& gm, const fx::Node& n) { return gm.get_submodule(n.target())->type_name(); }

// Throws unless float node f and quantized node q (same name) do the same thing.
void check_same_op(const fx::GraphModule& float_model, const fx::Node& f, const fx::GraphModule& quantized,
                   const fx::Node& q) {
  const std::string in_float = fx::op_name(f.op()).data() + std::string("[") + f.target() + "]";
  const std::string in_quantized = fx::op_name(q.op()).data() + std::string("[") + q.target() + "]";
  QFLOW_CHECK(f.op() == q.op() && f.target() == q.target(),
              "quant::compare: %{} is {} in the float model but {} in the quantized model; the quantized model was "
              "not made from this float model",
              q.name(), in_float, in_quantized);
  if (q.op() != fx::NodeOp::CallModule) return;
  const std::string from = module_type(float_model, f), to = module_type(quantized, q);
  QFLOW_CHECK(quantized_form_of(from, to),
              "quant::compare: %{} calls a {} at '{}' in the float model but a {} in the quantized model, which no "
              "pass makes of a {}; the quantized model was not made from this float model",
              q.name(), from, q.target(), to, from);
}

// The float node a quantized node's value corresponds to: `f`, or the last of the nodes the
// quantized graph folded into it (f's only user, reading f alone, absent from `quantized`).
const fx::Node* follow_folds(const fx::Node* f, const fx::Graph& quantized, std::unordered_set<const fx::Node*>& folded) {
  while (f->users().size() == 1) {
    const fx::Node* u = f->users().front();
    if (u->op() == fx::NodeOp::Output || u->all_input_nodes().size() != 1 || quantized.find_node(u->name()) != nullptr)
      break;
    folded.insert(u);
    f = u;
  }
  return f;
}

bool is_row(const fx::Node& n) {
  return n.op() == fx::NodeOp::CallModule || n.op() == fx::NodeOp::CallFunction || n.op() == fx::NodeOp::CallMethod;
}

}  // namespace

std::string node_what(const fx::GraphModule& gm, const fx::Node& n) {
  if (n.op() == fx::NodeOp::CallModule) return module_type(gm, n) + " (" + n.target() + ")";
  return n.target();
}

NodeMatching match_nodes(const fx::GraphModule& float_model, const fx::GraphModule& quantized) {
  NodeMatching m;
  std::unordered_set<const fx::Node*> matched_float, folded;
  for (const fx::Node* q : quantized.graph()) {
    if (q->op() == fx::NodeOp::Output) continue;
    const fx::Node* f = float_model.graph().find_node(q->name());
    if (f == nullptr) {
      QFLOW_CHECK(q->op() != fx::NodeOp::CallModule || !is_quantized_layer(module_type(quantized, *q)),
                  "quant::compare: %{} ({}) has no node of that name in the float model; the quantized model was not "
                  "made from this float model",
                  q->name(), node_what(quantized, *q));
      if (is_row(*q)) m.skipped.push_back(fmt::format("%{}: only in the quantized model ({})", q->name(), node_what(quantized, *q)));
      continue;
    }
    check_same_op(float_model, *f, quantized, *q);
    matched_float.insert(f);
    m.reference[q] = follow_folds(f, quantized.graph(), folded);
    if (is_row(*q)) m.rows.push_back(q);
  }
  QFLOW_CHECK(!m.rows.empty(),
              "quant::compare: no node of the quantized model ({} nodes) has a counterpart in the float model ({} "
              "nodes); the two are not the same model",
              quantized.graph().size(), float_model.graph().size());
  for (const fx::Node* f : float_model.graph())
    if (is_row(*f) && !matched_float.count(f) && !folded.count(f))
      m.skipped.push_back(fmt::format("%{}: only in the float model ({})", f->name(), node_what(float_model, *f)));
  return m;
}

}  // namespace qflow::quant::detail
