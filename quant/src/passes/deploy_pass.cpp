// dequantization_aware_training: the deployable model of a trained QAT (or calibrated PTQ)
// GraphModule. See passes.h.
#include <algorithm>

#include "pass_util.h"
#include "qflow/quant/deploy.h"

namespace qflow::quant {
namespace {

// qat_gm must have been made from float_gm with `mapping`: the Q module at `path` replaced a
// float module of the expected type there, with the QConfig the mapping resolves for it.
void check_origin(const fx::GraphModule& float_gm, const fx::Node& node, const QuantModule& q, const char* q_type,
                  const char* float_type, const QConfigMapping& mapping) {
  const std::string& path = node.target();
  std::string found = "no module";
  try {
    found = "a " + float_gm.get_submodule(path)->type_name();
  } catch (const Error&) {
  }
  QFLOW_CHECK(found == std::string("a ") + float_type,
              "dequantization_aware_training: %{} runs a {} at '{}' but the float model has {} there (expected a {}); "
              "the QAT model was not made from this float model",
              node.name(), q_type, path, found, float_type);
  const std::optional<QConfig> wanted = mapping.resolve(path, float_type);
  QFLOW_CHECK(wanted == q.qconfig(),
              "dequantization_aware_training: %{} ({} at '{}') was built with {}, not {} (the mapping's {}); deploy "
              "with the QConfig mapping the model was trained with",
              node.name(), q_type, path, q.qconfig().to_string(), to_string(wanted), mapping.deciding_rule(path, float_type));
}

// A float Conv2d/Linear left in qat_gm must be one the mapping leaves float.
void check_left_float(const fx::Node& node, const std::string& type, const QConfigMapping& mapping) {
  const std::optional<QConfig> wanted = mapping.resolve(node.target(), type);
  QFLOW_CHECK(!wanted, "dequantization_aware_training: %{} ({} at '{}') is float in the QAT model, but the mapping's {} "
              "quantizes it with {}; deploy with the QConfig mapping the model was trained with",
              node.name(), type, node.target(), mapping.deciding_rule(node.target(), type), wanted->to_string());
}

}  // namespace

std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const TensorList& examples,
                                                               const QConfigMapping& mapping, PassSummary* summary) {
  PassSummary s = detail::begin_pass("dequantization_aware_training", float_gm, mapping);
  const auto& quantizable = quantizable_types();
  detail::ScratchGenerator keep_callers_stream;
  auto deploy = detail::copy_graph_module(qat_gm);
  std::map<std::string, nn::ModulePtr> built;  // path -> D module (shared calls share one)
  std::vector<fx::Node*> relu_after;            // nodes of a QConvBN that applied a ReLU itself
  for (fx::Node* n : deploy->graph()) {
    if (n->op() != fx::NodeOp::CallModule) continue;
    const std::string& path = n->target();
    const nn::ModulePtr m = deploy->get_submodule(path);
    const auto* q = dynamic_cast<const QuantModule*>(m.get());
    if (q == nullptr) {
      const std::string type = m->type_name();
      if (std::find(quantizable.begin(), quantizable.end(), type) != quantizable.end()) {
        check_left_float(*n, type, mapping);
        s.left_float.push_back({n->name(), path, type, type, "", std::nullopt});
      }
      continue;
    }
    const std::string from = m->type_name();
    // Built before the origin check, as the deploy factories' own errors (an observer that
    // never recorded) come first; a module shared by several calls keeps its first form.
    const nn::ModulePtr deployed = q->deploy();
    check_origin(float_gm, *n, *q, from.c_str(), q->float_type(), mapping);
    if (!built.count(path)) built.emplace(path, deployed);
    const std::string to = built.at(path)->type_name();
    s.replaced.push_back({n->name(), path, from, to, q->folds_batchnorm() ? path + ".bn" : "", q->qconfig()});
    ++s.counts[to];
    if (q->folds_batchnorm()) ++s.batchnorm_folded;
    if (q->applies_relu()) relu_after.push_back(n);
  }
  // A QConvBN fused with its ReLU (fx::fuse_activations) deploys as DConv2d → relu, the float
  // graph's shape again (what the ONNX export and the int8 path expect).
  for (fx::Node* n : relu_after) {
    fx::Node* relu = nullptr;
    {
      auto guard = deploy->graph().inserting_after(n);
      relu = deploy->graph().create_node(fx::NodeOp::CallFunction, "relu", {fx::Argument(n)}, {}, "relu");
    }
    relu->meta().outputs = n->meta().outputs;
    n->replace_all_uses_with(relu, [relu](const fx::Node& user) { return &user != relu; });
  }
  for (auto& [path, module] : built) deploy->add_submodule(path, module);
  detail::finish_pass(*deploy, examples, s);
  s.float_layers = float_layers(*deploy);
  s.integer_layers = static_cast<int64_t>(built.size() - s.float_layers.size());
  if (summary != nullptr) *summary = std::move(s);
  return deploy;
}

std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const Tensor& example,
                                                               const QConfigMapping& mapping, PassSummary* summary) {
  return dequantization_aware_training(float_gm, qat_gm, TensorList{example}, mapping, summary);
}

std::shared_ptr<fx::GraphModule> dequantization_aware_training(const fx::GraphModule& float_gm,
                                                               const fx::GraphModule& qat_gm, const Tensor& example,
                                                               const QConfig& qconfig, PassSummary* summary) {
  return dequantization_aware_training(float_gm, qat_gm, TensorList{example}, QConfigMapping(qconfig), summary);
}

}  // namespace qflow::quant
