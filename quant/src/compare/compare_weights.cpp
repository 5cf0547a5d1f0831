// quantized_weight, reference_weight: see compare_weights.h.
#include "compare_weights.h"

#include "qflow/fx/fuse.h"
#include "qflow/quant/deploy.h"

namespace qflow::quant::detail {

Tensor quantized_weight(const nn::Module& layer) {
  if (const auto* q = dynamic_cast<const QuantModule*>(&layer)) return q->quantized_weight();
  if (const auto* d = dynamic_cast<const DeployedModule*>(&layer)) return d->float_weight();
  return {};
}

namespace {

// The float weight a module holds, whichever stage it comes from (the "float" model may be
// a QAT model with fake quantization off).
Tensor float_weight_of(const nn::Module& m) {
  if (const auto* c = dynamic_cast<const nn::Conv2d*>(&m)) return c->weight;
  if (const auto* l = dynamic_cast<const nn::Linear*>(&m)) return l->weight;
  if (const auto* q = dynamic_cast<const QuantModule*>(&m)) return q->float_weight();
  if (const auto* d = dynamic_cast<const DeployedModule*>(&m)) return d->float_weight();
  return {};
}

}  // namespace

Tensor reference_weight(const fx::GraphModule& float_model, const fx::Node& float_node, const fx::Node& reference) {
  const nn::ModulePtr m = float_model.get_submodule(float_node.target());
  const auto conv = std::dynamic_pointer_cast<nn::Conv2d>(m);
  for (const fx::Node* n = &float_node; conv && n != &reference;) {
    n = n->users().front();  // the folded chain: each node the only user of the one before
    if (n->op() != fx::NodeOp::CallModule) continue;
    if (const auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(float_model.get_submodule(n->target())))
      return fx::fuse_conv_bn_eval(*conv, *bn)->weight;
  }
  return float_weight_of(*m);
}

}  // namespace qflow::quant::detail
