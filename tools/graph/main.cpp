// qflow-graph: trace a zoo model and write its fx graph as Graphviz dot (and PNG/SVG), or
// print it as FX text and generated code.
#include <filesystem>
#include <map>
#include <optional>

#include "compare_run.h"
#include "graph_options.h"
#include "common/qconfig_option.h"
#include "qflow/qflow.h"
#include "qflow/fx/fx.h"
#include "render.h"
#include "stages.h"

namespace qflow::tools {
namespace {

// "52 nodes: 1 placeholder, 20 Conv2d, 17 relu, ..." — what the picture holds, by kind.
std::string summary(const fx::GraphModule& gm) {
  std::map<std::string, size_t> counts;
  for (const fx::Node* n : gm.graph()) {
    if (n->op() == fx::NodeOp::CallModule) ++counts[gm.get_submodule(n->target())->type_name()];
    else if (n->op() == fx::NodeOp::CallFunction || n->op() == fx::NodeOp::CallMethod) ++counts[n->target()];
    else ++counts[std::string(fx::op_name(n->op()))];
  }
  std::string s = fmt::format("{} nodes:", gm.graph().size());
  for (const auto& [kind, n] : counts) s += fmt::format(" {} {},", n, kind);
  s.pop_back();
  return s;
}

int run(const GraphOptions& o) {
  manual_seed(o.seed);
  nn::ModulePtr model = create_model(o);
  // Float weights go into the model; a quantized model's state (qflow-train --qat's checkpoints,
  // deploy.safetensors) is loaded by the qat/deploy stages into the model they build.
  std::optional<nn::StateDict> quant_weights;
  if (!o.weights.empty()) {
    nn::StateDict weights = nn::load(o.weights);
    if (weights_kind(weights) == WeightsKind::Float) model->load_state_dict(weights);
    else quant_weights = std::move(weights);
  }
  model->eval();  // the graphs describe inference; fused folds the running statistics
  quant::QConfig qconfig{.bits = o.bits, .scheme = quant::parse_scheme(o.scheme),
                         .formula = quant::parse_formula(o.formula), .per_layer = !o.per_channel,
                         .activation_bits = o.activation_bits};
  o.observer.apply_to(qconfig);
  qconfig.validate();
  StageContext context(model, randn({o.batch, o.in_channels, o.image_size, o.image_size}),
                       qconfig_mapping(qconfig, o.qconfig_file), std::move(quant_weights));
  const bool comparing = !o.compare.empty();
  const std::string out = !o.out.empty() ? o.out
                          : comparing    ? fmt::format("{}_{}_sqnr.dot", o.model, o.stage)
                                         : fmt::format("{}_{}.dot", o.model, o.stage);
  fx::DotOptions dot;
  dot.title = fmt::format("{} ({})", o.model, o.stage);
  dot.rankdir = o.rankdir;
  std::shared_ptr<fx::GraphModule> gm;
  CompareOutput compared;
  const std::string csv = std::filesystem::path(out).replace_extension("csv").string();
  if (comparing) {
    prepare_compare(o, context);
    compared = run_compare(o, context, csv);
    gm = compared.graph;
    dot.title += "\n" + compared.title;
  } else {
    gm = build_stage(o.stage, context);
  }
  {
    NoGradGuard no_grad;
    fx::ShapeProp(*gm).run(context.example());
  }

  write_text_file(out, fx::to_dot(*gm, dot));
  fmt::print("qflow-graph: {} ({}), {}\n", o.model, o.stage, summary(*gm));
  if (comparing) fmt::print("qflow-graph: wrote {}\n", csv);
  fmt::print("qflow-graph: wrote {}\n", out);
  if (o.print) fmt::print("\n{}\n{}", gm->graph().to_string(), gm->code());
  for (const auto& [wanted, format] : {std::pair{o.png, "png"}, std::pair{o.svg, "svg"}}) {
    if (!wanted) continue;
    const std::string picture = std::filesystem::path(out).replace_extension(format).string();
    render_graphviz(out, format, picture);
    fmt::print("qflow-graph: wrote {}\n", picture);
  }
  if (comparing) {
    fmt::print("\nqflow-graph: {}\n{}", compared.title, compared.table);
    if (!compared.skipped.empty()) fmt::print("not compared:\n{}", compared.skipped);
  }
  return 0;
}

}  // namespace
}  // namespace qflow::tools

int main(int argc, char** argv) {
  CLI::App app{"qflow-graph — trace a model of the qflow zoo and draw its fx graph (Graphviz dot, PNG, SVG)"};
  qflow::tools::GraphOptions options;
  qflow::tools::add_graph_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return qflow::tools::run(options);
  } catch (const qflow::Error& e) {
    fmt::print(stderr, "qflow-graph: error: {}\n", e.message());
    return 1;
  }
}
