// quantization_aware_training and the rewrite it shares with prepare_ptq.
// See Note [QAT rewrite] in passes.h.
#include <algorithm>
#include <unordered_map>

#include "pass_util.h"
#include "qflow/fx/pattern.h"
#include "qflow/fx/shape_prop.h"
#include "qflow/quant/calibrate.h"
#include "qflow/quant/qconv.h"
#include "qflow/quant/qconvbn.h"
#include "qflow/quant/qlinear.h"
#include "qflow/quant/quant_meta.h"

namespace qflow::quant {
namespace detail {
namespace {

bool tracks_running_stats(const fx::Node& n, const fx::GraphModule& gm) {
  return gm.get_submodule<nn::BatchNorm2d>(n.target())->options().track_running_stats;
}

// Conv2d → BatchNorm2d chains whose two modules nothing else uses become QConvBN at the
// conv's path (the BN's node and submodule go).
void fold_conv_bn(fx::GraphModule& gm, const QConfig& qc, PassSummary& summary) {
  const fx::NodePattern is_bn = fx::module_type<nn::BatchNorm2d>();
  const fx::Pattern conv_bn{fx::module_type<nn::Conv2d>(),
                            fx::where("BatchNorm2d with running statistics", [is_bn](const fx::Node& n, const fx::GraphModule& g) {
                              return is_bn.matches(n, g) && tracks_running_stats(n, g);
                            })};
  for (const fx::Match& m : fx::match_chains(gm, conv_bn)) {
    const std::string conv_path = m.nodes[0]->target(), bn_path = m.nodes[1]->target();
    // A shared conv or BN keeps its float pair; the conv alone is quantized below.
    if (uses_of(gm.graph(), conv_path) != 1 || uses_of(gm.graph(), bn_path) != 1) continue;
    auto q = QConvBN::from_float(*gm.get_submodule<nn::Conv2d>(conv_path), *gm.get_submodule<nn::BatchNorm2d>(bn_path), qc);
    const fx::Node* node = fx::replace_chain(gm, m, q, conv_path);
    summary.replaced.push_back({node->name(), conv_path, "Conv2d + BatchNorm2d", "QConvBN", bn_path});
    ++summary.counts["QConvBN"];
    ++summary.batchnorm_folded;
  }
}

// Every node calling a module of type From gets a To built by `make` in that module's place
// (one new module per path, so calls that shared a module still share one).
template <class From, class To>
void replace_modules(fx::GraphModule& gm, const std::string& to_name, PassSummary& summary,
                     std::shared_ptr<To> (*make)(const From&, const QConfig&), const QConfig& qc) {
  std::unordered_map<std::string, bool> done;
  for (const fx::Match& m : fx::match_chains(gm, fx::Pattern{fx::module_type<From>()})) {
    const fx::Node* node = m.first();
    const std::string& path = node->target();
    if (!done[path]) {
      gm.add_submodule(path, make(*gm.get_submodule<From>(path), qc));
      done[path] = true;
    }
    summary.replaced.push_back({node->name(), path, fx::detail::short_type_name(typeid(From)), to_name, ""});
    ++summary.counts[to_name];
  }
}

int64_t count_modules(const fx::GraphModule& gm, const std::string& type) {
  int64_t n = 0;
  for (const fx::Node* node : gm.graph())
    if (node->op() == fx::NodeOp::CallModule && gm.get_submodule(node->target())->type_name() == type) ++n;
  return n;
}

}  // namespace

std::shared_ptr<fx::GraphModule> copy_graph_module(const fx::GraphModule& gm) {
  auto copy = std::dynamic_pointer_cast<fx::GraphModule>(gm.clone());
  QFLOW_ASSERT(copy != nullptr, "GraphModule::clone returned another type");
  return copy;
}

int64_t uses_of(const fx::Graph& graph, const std::string& path) {
  const std::string below = path + ".";
  int64_t uses = 0;
  for (const fx::Node* n : graph) {
    const bool call = n->op() == fx::NodeOp::CallModule, attr = n->op() == fx::NodeOp::GetAttr;
    if ((call && n->target() == path) || ((call || attr) && n->target().compare(0, below.size(), below) == 0)) ++uses;
  }
  return uses;
}

void quantize_in_place(fx::GraphModule& gm, const QConfig& qconfig, PassSummary& summary) {
  fold_conv_bn(gm, qconfig, summary);
  replace_modules<nn::Conv2d, QConv2d>(gm, "QConv2d", summary, &QConv2d::from_float, qconfig);
  replace_modules<nn::Linear, QLinear>(gm, "QLinear", summary, &QLinear::from_float, qconfig);
}

void finish_pass(fx::GraphModule& gm, const Tensor& example, PassSummary& summary) {
  gm.recompile();
  std::unordered_map<std::string, size_t> position;
  for (const fx::Node* n : gm.graph()) position.emplace(n->name(), position.size());
  std::stable_sort(summary.replaced.begin(), summary.replaced.end(),
                   [&](const Replacement& a, const Replacement& b) { return position.at(a.node) < position.at(b.node); });
  summary.batchnorm_left = count_modules(gm, "BatchNorm2d");
  summary.conv_left = count_modules(gm, "Conv2d");
  summary.linear_left = count_modules(gm, "Linear");
  QFLOW_CHECK(example.defined(), "{}: the example input is undefined", summary.pass);
  {
    // Eval mode: BatchNorm with a batch of one still runs, and nothing would record anyway
    // (ShapeProp also restores buffers and the generator).
    ModeGuard modes(gm);
    gm.eval();
    fx::ShapeProp(gm).run(example);
  }
  annotate_quant_meta(gm);
}

}  // namespace detail

std::shared_ptr<fx::GraphModule> quantization_aware_training(const fx::GraphModule& gm, const Tensor& example,
                                                             const QConfig& qconfig, PassSummary* summary) {
  qconfig.validate();
  PassSummary s;
  s.pass = "quantization_aware_training";
  s.qconfig = qconfig;
  detail::ScratchGenerator keep_callers_stream;
  auto qat = detail::copy_graph_module(gm);
  detail::quantize_in_place(*qat, qconfig, s);
  detail::finish_pass(*qat, example, s);
  if (summary != nullptr) *summary = std::move(s);
  return qat;
}

}  // namespace qflow::quant
