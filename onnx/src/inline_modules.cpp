#include "inline_modules.h"

#include <fmt/format.h>

#include <exception>
#include <unordered_map>

#include "converter.h"
#include "qflow/fx/trace.h"

namespace qflow::onnx::detail {
namespace {

bool has_converter(const nn::Module& m) { return module_converters().count(std::type_index(typeid(m))) != 0; }

fx::Argument map_args(const fx::Argument& a, const std::unordered_map<fx::Node*, fx::Node*>& map) {
  return fx::map_nodes(a, [&](fx::Node* s) { return map.at(s); });
}

std::shared_ptr<fx::GraphModule> trace_module(fx::GraphModule& gm, fx::Node& n) {
  nn::ModulePtr module = gm.get_submodule(n.target());
  QFLOW_ONNX_CHECK(n.kwargs().empty(), n, "a {} called with keyword arguments cannot be exported",
                   module->type_name());
  fx::TraceOptions options;
  for (const fx::Argument& a : n.args()) {
    QFLOW_ONNX_CHECK(a.is_node() && a.node()->meta().has_shape(), n,
                     "{} has no ONNX converter, and inlining its forward needs tensor arguments of known shape, got {}",
                     module->type_name(), fx::format_argument(a));
    options.inputs.push_back(a.node()->meta().outputs.front());
  }
  // Modules with converters stay whole; everything else is traced down to ops.
  options.is_leaf = [](const nn::Module& m, const std::string&) { return has_converter(m); };
  try {
    return fx::symbolic_trace(module, options);
  } catch (const std::exception& e) {
    fail(n, fmt::format("{} has no ONNX converter and its forward could not be traced: {}", module->type_name(), e.what()));
  }
}

/// Copies the nodes of `sub` (traced from n's module) in front of `n`, then removes `n`.
void splice(fx::GraphModule& gm, fx::Node& n, const fx::GraphModule& sub) {
  fx::Graph& g = gm.graph();
  const std::string path = n.target();
  std::unordered_map<fx::Node*, fx::Node*> map;
  const auto placeholders = sub.graph().placeholders();
  QFLOW_ONNX_CHECK(placeholders.size() == n.args().size(), n, "its module's forward takes {} inputs, the node passes {}",
                   placeholders.size(), n.args().size());
  for (size_t i = 0; i < placeholders.size(); ++i) map[placeholders[i]] = n.args()[i].node();

  fx::Node* result = nullptr;
  std::vector<fx::Node*> created;
  {
    auto guard = g.inserting_before(&n);
    for (fx::Node* s : sub.graph().nodes()) {
      fx::Node* copy = nullptr;
      switch (s->op()) {
        case fx::NodeOp::Placeholder: continue;
        case fx::NodeOp::Output: {
          const fx::Argument& out = s->args().at(0);
          QFLOW_ONNX_CHECK(out.is_node(), n, "a module returning {} cannot be inlined", fx::format_argument(out));
          result = map.at(out.node());
          continue;
        }
        case fx::NodeOp::GetAttr: {
          // The module's own parameters live at path.<name> in gm; trace-time constants move over.
          const auto c = sub.constants().find(s->target());
          const std::string target = c != sub.constants().end() ? gm.add_constant(c->second, s->target())
                                                                : path + "." + s->target();
          copy = g.get_attr(target);
          break;
        }
        default: {
          fx::Arguments args;
          for (const fx::Argument& a : s->args()) args.push_back(map_args(a, map));
          fx::Kwargs kwargs;
          for (const auto& [k, a] : s->kwargs()) kwargs.emplace_back(k, map_args(a, map));
          // A nested module (one with a converter) sits at path.<its path> in gm.
          std::string target = s->op() == fx::NodeOp::CallModule ? path + "." + s->target() : s->target();
          copy = g.create_node(s->op(), std::move(target), std::move(args), std::move(kwargs), n.name() + "_" + s->name());
        }
      }
      copy->meta() = s->meta();
      copy->meta().set("onnx.inlined_from", path);
      map[s] = copy;
      created.push_back(copy);
    }
  }
  QFLOW_ONNX_CHECK(result != nullptr, n, "its module's forward has no output");
  n.replace_all_uses_with(result);
  const std::string name = n.name();
  g.erase_node(&n);
  // A one-op module (ReLU, MaxPool2d) keeps the node's name, so the graphs read alike.
  if (created.size() == 1) g.rename(created.front(), name);
}

}  // namespace

void inline_modules(fx::GraphModule& gm) {
  // splice erases the node the walk stands on (Note [Erasing during a walk]); the nodes it
  // adds come before it, outside the snapshot, and need no inlining (they are traced down to
  // modules with converters).
  for (fx::Node* n : gm.graph().nodes()) {
    if (n->op() != fx::NodeOp::CallModule || has_converter(*gm.get_submodule(n->target()))) continue;
    auto sub = trace_module(gm, *n);
    splice(gm, *n, *sub);
  }
  // Outputs a module's forward computed but did not return (dropout's mask) go.
  gm.graph().eliminate_dead_code();
  gm.recompile();
}

}  // namespace qflow::onnx::detail
