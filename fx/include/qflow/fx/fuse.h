#pragma once
// Graph fusions: Conv + BatchNorm folding for inference, the first client of the chain rewriter
// (pattern.h), and the ReLU fusions for training and inference (fuse_activations).
//
// In eval mode BatchNorm2d is an affine map per channel with fixed statistics:
//   bn(y) = gamma * (y - mean) / sqrt(var + eps) + beta,
// so bn(conv(x)) is one convolution with
//   W' = W * s,  b' = beta + (b - mean) * s,  s = gamma / sqrt(var + eps)   (s per output channel).
// The fused model runs one kernel per conv instead of two and keeps the eval outputs (up to
// float rounding: the folding is computed in float64 and rounded once to the weight dtype).
#include <map>
#include <memory>
#include <string>

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

/// What fuse_activations changed.
struct ActivationFusions {
  /// Module → ReLU chains now one module, by the module's type ("BatchNorm2d": 9).
  std::map<std::string, size_t> module_relu;
  size_t add_relu = 0;      // add → ReLU chains now one add_relu
  size_t inplace_relu = 0;  // ReLUs now overwriting their input (relu_)
  /// module_relu's count for `type` (0 when absent).
  size_t modules(const std::string& type) const;
  /// "9 BatchNorm2d+ReLU fused, 8 add+ReLU fused, 0 ReLU made in-place".
  std::string to_string() const;
};

/// Fuses ReLUs into what computes their input, in place, for training as for inference
/// (PyTorch users get this from torch.compile; here it is an explicit pass):
///  - module → ReLU (module, relu or relu_) becomes the module's fused_with_relu() form at the
///    module's path, sharing its parameters and buffers, so gm's state_dict keys and values are
///    unchanged and training gm trains the module it was traced from: BatchNorm2d becomes
///    BatchNormReLU2d, Conv2d a ConvReLU2d (a oneDNN post-op; in eval after fuse_conv_bn that
///    is conv + BN + ReLU in one primitive), quant::QConvBN and quant::DConv2d ones that apply it;
///  - add(a, b) → ReLU (alpha 1) becomes add_relu(a, b);
///  - any other ReLU whose input only it reads, computed by a Conv2d, Linear, conv2d, linear,
///    add, sub, mul or matmul (whose backward does not read its own output), becomes relu_.
/// Chains follow Note [Chain patterns]. Outputs and gradients stay equal bit for bit (oneDNN's
/// ReLU post-op included, tests/fx/fuse_activations_test.cpp). Run it after the quantization
/// passes, never before: they look for BatchNorm2d.
ActivationFusions fuse_activations(GraphModule& gm);

}  // namespace qflow::fx
