#pragma once
// Conv + BatchNorm folding for inference, the first client of the chain rewriter (pattern.h).
//
// In eval mode BatchNorm2d is an affine map per channel with fixed statistics:
//   bn(y) = gamma * (y - mean) / sqrt(var + eps) + beta,
// so bn(conv(x)) is one convolution with
//   W' = W * s,  b' = beta + (b - mean) * s,  s = gamma / sqrt(var + eps)   (s per output channel).
// The fused model runs one kernel per conv instead of two and keeps the eval outputs (up to
// float rounding: the folding is computed in float64 and rounded once to the weight dtype).
#include <memory>

#include "qflow/fx/graph_module.h"
#include "qflow/nn/layers/batchnorm.h"
#include "qflow/nn/layers/conv.h"

namespace qflow::fx {

/// A new Conv2d computing bn(conv(x)) as `bn` computes it in eval mode (always with a bias).
/// Throws qflow::Error when bn does not track running statistics or its channel count differs
/// from conv's output channels.
std::shared_ptr<nn::Conv2d> fuse_conv_bn_eval(const nn::Conv2d& conv, const nn::BatchNorm2d& bn);

/// A deep copy of `gm` in which every Conv2d node whose only user is a BatchNorm2d node (see
/// Note [Chain patterns]) is replaced by one fused Conv2d at the conv's path; the BatchNorm2d
/// submodules are gone. BatchNorms without running statistics are left alone. `gm` itself is
/// not modified. Throws qflow::Error when a BatchNorm2d to fold is in training mode (folding
/// freezes the running statistics, which only eval mode uses).
std::shared_ptr<GraphModule> fuse_conv_bn(const GraphModule& gm);

}  // namespace qflow::fx
