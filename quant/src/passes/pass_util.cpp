// What the quantization passes (qat_pass.cpp, deploy_pass.cpp, ptq.cpp) share, declared in
// pass_util.h: copying a model, counting a module's uses, a pass's summary, and the rewrite of
// Note [QAT rewrite] that quantization_aware_training and prepare_ptq both run.
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
// conv's path (the BN's node and submodule go), unless the mapping leaves the conv float.
void fold_conv_bn(fx::GraphModule& gm, PassSummary& summary) {
  const fx::NodePattern is_bn = fx::module_type<nn::BatchNorm2d>();
  const fx::Pattern conv_bn{fx::module_type<nn::Conv2d>(),
                            fx::where("BatchNorm2d with running statistics", [is_bn](const fx::Node& n, const fx::GraphModule& g) {
                              return is_bn.matches(n, g) && tracks_running_stats(n, g);
                            })};
  for (const fx::Match& m : fx::match_chains(gm, conv_bn)) {
    const std::string conv_path = m.nodes[0]->target(), bn_path = m.nodes[1]->target();
    const std::optional<QConfig> qc = summary.mapping.resolve(conv_path, "Conv2d");
    if (!qc) continue;  // left float, BN and all (replace_modules records the row)
    // A shared conv or BN keeps its float pair; the conv alone is quantized below.
    if (uses_of(gm.graph(), conv_path) != 1 || uses_of(gm.graph(), bn_path) != 1) continue;
    auto q = QConvBN::from_float(*gm.get_submodule<nn::Conv2d>(conv_path), *gm.get_submodule<nn::BatchNorm2d>(bn_path), *qc);
    const fx::Node* node = fx::replace_chain(gm, m, q, conv_path);
    summary.replaced.push_back({node->name(), conv_path, "Conv2d + BatchNorm2d", "QConvBN", bn_path, qc});
    ++summary.counts["QConvBN"];
    ++summary.batchnorm_folded;
  }
}

// Every node calling a module of type From gets a To built by `make` in that module's place
// with the QConfig the mapping resolves for its path (one new module per path, so calls that
// shared a module still share one); a layer the mapping leaves float stays as it is.
template <class From, class To>
void replace_modules(fx::GraphModule& gm, const std::string& to_name, PassSummary& summary,
                     std::shared_ptr<To> (*make)(const From&, const QConfig&)) {
  const std::string from_name = fx::detail::short_type_name(typeid(From));
  std::unordered_map<std::string, bool> done;
  for (const fx::Match& m : fx::match_chains(gm, fx::Pattern{fx::module_type<From>()})) {
    const fx::Node* node = m.first();
    const std::string& path = node->target();
    const std::optional<QConfig> qc = summary.mapping.resolve(path, from_name);
    if (!qc) {
      summary.left_float.push_back({node->name(), path, from_name, from_name, "", std::nullopt});
      continue;
    }
    if (!done[path]) {
      gm.add_submodule(path, make(*gm.get_submodule<From>(path), *qc));
      done[path] = true;
    }
    summary.replaced.push_back({node->name(), path, from_name, to_name, "", qc});
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

PassSummary begin_pass(const char* pass, const fx::GraphModule& gm, const QConfigMapping& mapping) {
  mapping.check_layers(quantizable_layers(gm), pass);
  PassSummary s;
  s.pass = pass;
  s.mapping = mapping;
  return s;
}

void quantize_in_place(fx::GraphModule& gm, PassSummary& summary) {
  fold_conv_bn(gm, summary);
  replace_modules<nn::Conv2d, QConv2d>(gm, "QConv2d", summary, &QConv2d::from_float);
  replace_modules<nn::Linear, QLinear>(gm, "QLinear", summary, &QLinear::from_float);
}

void finish_pass(fx::GraphModule& gm, const TensorList& examples, PassSummary& summary) {
  gm.recompile();
  std::unordered_map<std::string, size_t> position;
  for (const fx::Node* n : gm.graph()) position.emplace(n->name(), position.size());
  for (auto* rows : {&summary.replaced, &summary.left_float})
    std::stable_sort(rows->begin(), rows->end(), [&](const Replacement& a, const Replacement& b) {
      return position.at(a.node) < position.at(b.node);
    });
  summary.batchnorm_left = count_modules(gm, "BatchNorm2d");
  summary.conv_left = count_modules(gm, "Conv2d");
  summary.linear_left = count_modules(gm, "Linear");
  for (size_t i = 0; i < examples.size(); ++i)
    QFLOW_CHECK(examples[i].defined(), "{}: the example input{} is undefined", summary.pass,
                examples.size() == 1 ? std::string() : fmt::format(" {}", i));
  QFLOW_CHECK(examples.size() == gm.graph().placeholders().size(),
              "{}: the model takes {} inputs but {} example inputs were given", summary.pass,
              gm.graph().placeholders().size(), examples.size());
  {
    // Eval mode: BatchNorm with a batch of one still runs, and nothing would record anyway
    // (ShapeProp also restores buffers and the generator).
    ModeGuard modes(gm);
    gm.eval();
    fx::ShapeProp(gm).run(examples);
  }
  annotate_quant_meta(gm);
}

}  // namespace detail

}  // namespace qflow::quant
