// Conv + BatchNorm folding for eval (see fuse.h for the algebra).
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/generator.h"
#include "qflow/fx/fuse.h"
#include "qflow/fx/pattern.h"

namespace qflow::fx {

std::shared_ptr<nn::Conv2d> fuse_conv_bn_eval(const nn::Conv2d& conv, const nn::BatchNorm2d& bn) {
  const nn::Conv2dOptions& co = conv.options();
  const nn::BatchNormOptions& bo = bn.options();
  QFLOW_CHECK(bo.track_running_stats,
              "fuse_conv_bn_eval: the BatchNorm2d has no running statistics (track_running_stats=False), so eval mode "
              "normalises with batch statistics and cannot be folded into the conv");
  QFLOW_CHECK(bo.features == co.out, "fuse_conv_bn_eval: BatchNorm2d({}) cannot follow a Conv2d with {} output channels",
              bo.features, co.out);
  NoGradGuard no_grad;
  // Folding in float64 and rounding once keeps the fused conv within float rounding of conv+BN.
  const DType dtype = conv.weight.dtype();
  const Tensor gamma = bo.affine ? bn.weight.to(DType::Float64) : ones({co.out}, DType::Float64);
  const Tensor beta = bo.affine ? bn.bias.to(DType::Float64) : zeros({co.out}, DType::Float64);
  const Tensor b = conv.bias.defined() ? conv.bias.to(DType::Float64) : zeros({co.out}, DType::Float64);
  const Tensor scale = gamma * (bn.running_var.to(DType::Float64) + bo.eps).rsqrt();  // (out)
  const Tensor w = conv.weight.to(DType::Float64) * scale.view({co.out, 1, 1, 1});   // (out, in/groups, kh, kw)
  const Tensor bias = beta + (b - bn.running_mean.to(DType::Float64)) * scale;

  nn::Conv2dOptions fo = co;
  fo.bias = true;
  std::shared_ptr<nn::Conv2d> fused;
  {
    // The constructor's random initialisation is overwritten below; drawing it from a scratch
    // generator keeps fusion from moving the caller's random stream.
    Generator scratch;
    GeneratorGuard use_scratch(&scratch);
    fused = std::make_shared<nn::Conv2d>(fo);
  }
  fused->weight.copy_(w.to(dtype));
  fused->bias.copy_(bias.to(dtype));
  fused->weight.requires_grad_(conv.weight.requires_grad());  // a frozen conv stays frozen
  fused->bias.requires_grad_(conv.weight.requires_grad());
  fused->train(conv.is_training());
  return fused;
}

std::shared_ptr<GraphModule> fuse_conv_bn(const GraphModule& gm) {
  auto fused = std::dynamic_pointer_cast<GraphModule>(gm.clone());
  QFLOW_ASSERT(fused != nullptr, "GraphModule::clone returned another type");
  const NodePattern is_bn = module_type<nn::BatchNorm2d>();
  const Pattern conv_bn{module_type<nn::Conv2d>(),
                        where("BatchNorm2d with running statistics", [is_bn](const Node& n, const GraphModule& owner) {
                          return is_bn.matches(n, owner) &&
                                 owner.get_submodule<nn::BatchNorm2d>(n.target())->options().track_running_stats;
                        })};
  replace_pattern(*fused, conv_bn, [](GraphModule& owner, const Match& m) -> nn::ModulePtr {
    auto conv = owner.get_submodule<nn::Conv2d>(m.nodes[0]->target());
    auto bn = owner.get_submodule<nn::BatchNorm2d>(m.nodes[1]->target());
    QFLOW_CHECK(!bn->is_training(),
                "fuse_conv_bn: %{} ({}) is in training mode; folding freezes the running statistics, which only eval mode "
                "uses (call eval() first)",
                m.nodes[1]->name(), m.nodes[1]->target());
    return fuse_conv_bn_eval(*conv, *bn);
  });
  return fused;
}

}  // namespace qflow::fx
