#pragma once
#include <optional>

#include "qflow/nn/cloneable.h"
#include "qflow/nn/layers/conv.h"

namespace qflow::nn {

struct MaxPool2dOptions {
  Size2 kernel = 2;
  std::optional<Size2> stride = std::nullopt;  // defaults to kernel, as in PyTorch
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};
class MaxPool2d : public Cloneable<MaxPool2d> {
 public:
  explicit MaxPool2d(MaxPool2dOptions options) : options_(options) {}
  /// Nothing to register; it makes clone() copy the options (see Note [Module cloning]).
  void reset() {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  MaxPool2dOptions options_;
};

struct AvgPool2dOptions {
  Size2 kernel = 2;
  std::optional<Size2> stride = std::nullopt;
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
class AvgPool2d : public Cloneable<AvgPool2d> {
 public:
  explicit AvgPool2d(AvgPool2dOptions options) : options_(options) {}
  /// Nothing to register; it makes clone() copy the options (see Note [Module cloning]).
  void reset() {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  AvgPool2dOptions options_;
};

struct AdaptiveAvgPool2dOptions {
  Size2 output = 1;
};
class AdaptiveAvgPool2d : public Cloneable<AdaptiveAvgPool2d> {
 public:
  explicit AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions options = {}) : options_(options) {}
  /// Nothing to register; it makes clone() copy the options (see Note [Module cloning]).
  void reset() {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

 private:
  AdaptiveAvgPool2dOptions options_;
};

}  // namespace qflow::nn
