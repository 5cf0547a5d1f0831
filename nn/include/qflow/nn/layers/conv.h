#pragma once
#include "qflow/nn/cloneable.h"
#include "qflow/nn/functional.h"

namespace qflow::nn {

/// A height/width pair that also accepts one integer: `.kernel = 3` or `.kernel = {3, 5}`.
/// It remembers which spelling was used because PyTorch's pooling layers print the value as
/// given (`kernel_size=3` vs `kernel_size=(3, 3)`); equality compares the numbers only.
struct Size2 {
  Size2(int64_t v = 1) : h(v), w(v), single(true) {}  // NOLINT
  Size2(int64_t vh, int64_t vw) : h(vh), w(vw) {}
  IntList list() const { return {h, w}; }
  bool operator==(const Size2& o) const { return h == o.h && w == o.w; }
  /// "3" when given as one integer, else "(3, 5)" (Python's repr of what the user passed).
  std::string repr() const;
  int64_t h, w;
  bool single = false;
};

struct Conv2dOptions {
  int64_t in = 0;
  int64_t out = 0;
  Size2 kernel = 3;
  Size2 stride = 1;
  functional::Conv2dPadding padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// torch.nn.Conv2d: weight (out, in/groups, kh, kw) and bias (out) initialised like PyTorch
/// (kaiming_uniform with a = √5; bias U(±1/√fan_in)).
class Conv2d : public Cloneable<Conv2d> {
 public:
  explicit Conv2d(Conv2dOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const Conv2dOptions& options() const { return options_; }
  /// A ConvReLU2d sharing this module's tensors; null for padding="same".
  ModulePtr fused_with_relu() const override;

  Tensor weight;
  Tensor bias;

 private:
  Conv2dOptions options_;
};

/// relu(Conv2d(x)) in one op (conv2d_relu: a oneDNN post-op; PyTorch's intrinsic ConvReLU2d),
/// with the Conv2d's parameters and state_dict keys. fx::fuse_activations puts one in place of
/// a Conv2d followed by a ReLU (after fx::fuse_conv_bn that is every conv → BN → ReLU).
class ConvReLU2d : public Cloneable<ConvReLU2d> {
 public:
  /// Takes over `conv`'s weight and bias (shared: training one trains the other) and its
  /// train/eval mode. Throws for padding="same" (asymmetric for even kernels: no one op).
  explicit ConvReLU2d(const Conv2d& conv);
  /// Re-registers weight and bias (what clone() needs, Note [Module cloning]).
  void reset();
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const Conv2dOptions& options() const { return options_; }

  Tensor weight;
  Tensor bias;

 private:
  Conv2dOptions options_;
};

}  // namespace qflow::nn
