#pragma once
// Parameter-free element-wise layers.
#include "qflow/nn/cloneable.h"

namespace qflow::nn {

class ReLU : public Cloneable<ReLU> {
 public:
  Tensor forward(const Tensor& x) override;
};
class ReLU6 : public Cloneable<ReLU6> {
 public:
  Tensor forward(const Tensor& x) override;
};
class Hardswish : public Cloneable<Hardswish> {
 public:
  Tensor forward(const Tensor& x) override;
};
/// relu6(x + 3) / 6 (torch.nn.Hardsigmoid): the gate of MobileNetV3's squeeze-and-excitation blocks.
class Hardsigmoid : public Cloneable<Hardsigmoid> {
 public:
  Tensor forward(const Tensor& x) override;
};
/// x * sigmoid(x) (torch.nn.SiLU).
class SiLU : public Cloneable<SiLU> {
 public:
  Tensor forward(const Tensor& x) override;
};
class Sigmoid : public Cloneable<Sigmoid> {
 public:
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Cloneable<Tanh> {
 public:
  Tensor forward(const Tensor& x) override;
};
/// Returns its input unchanged (a placeholder that keeps state_dict paths stable).
class Identity : public Cloneable<Identity> {
 public:
  Tensor forward(const Tensor& x) override { return x; }
};

struct FlattenOptions {
  int64_t start_dim = 1;
  int64_t end_dim = -1;
};
class Flatten : public Cloneable<Flatten> {
 public:
  explicit Flatten(FlattenOptions options = {}) : options_(options) {}
  /// Nothing to register; it makes clone() copy the options (see Note [Module cloning]).
  void reset() {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  FlattenOptions options_;
};

struct DropoutOptions {
  double p = 0.5;
};
/// Zeroes each element with probability p in training (scaling the rest by 1/(1−p)); the
/// identity in eval. Draws from the default generator (seed with manual_seed).
class Dropout : public Cloneable<Dropout> {
 public:
  explicit Dropout(DropoutOptions options = {});
  /// Nothing to register; it makes clone() copy the options (see Note [Module cloning]).
  void reset() {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
};

}  // namespace qflow::nn
