// prepare_ptq: post-training quantization's model, BN folded for good before quantizing.
#include "pass_util.h"
#include "qflow/fx/fuse.h"

namespace qflow::quant {

std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const TensorList& examples,
                                             const QConfigMapping& mapping, PassSummary* summary) {
  PassSummary s = detail::begin_pass("prepare_ptq", gm, mapping);
  // fuse_conv_bn folds only eval-mode BatchNorms (it freezes their statistics); gm's own
  // modes are not ours to change, so fold a copy that is in eval mode.
  detail::ScratchGenerator keep_callers_stream;
  auto copy = detail::copy_graph_module(gm);
  copy->eval();
  const auto count_bn = [](const fx::GraphModule& g) {
    int64_t n = 0;
    for (const fx::Node* node : g.graph())
      if (node->op() == fx::NodeOp::CallModule && g.get_submodule(node->target())->type_name() == "BatchNorm2d") ++n;
    return n;
  };
  auto ptq = fx::fuse_conv_bn(*copy);
  s.batchnorm_folded = count_bn(*copy) - count_bn(*ptq);
  detail::quantize_in_place(*ptq, s);
  detail::finish_pass(*ptq, examples, s);
  if (summary != nullptr) *summary = std::move(s);
  return ptq;
}

std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const Tensor& example,
                                             const QConfigMapping& mapping, PassSummary* summary) {
  return prepare_ptq(gm, TensorList{example}, mapping, summary);
}

std::shared_ptr<fx::GraphModule> prepare_ptq(const fx::GraphModule& gm, const Tensor& example, const QConfig& qconfig,
                                             PassSummary* summary) {
  return prepare_ptq(gm, TensorList{example}, QConfigMapping(qconfig), summary);
}

}  // namespace qflow::quant
