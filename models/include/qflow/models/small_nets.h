#pragma once
// CIFAR-sized classics: MobileNetV2 (kuangliu/pytorch-cifar layout), AlexNet and LeNet-5.
#include <memory>

#include "qflow/nn/nn.h"

namespace qflow::models {

struct SmallNetOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  /// Input height/width (32 for CIFAR, 28 for MNIST-family).
  int64_t image_size = 32;
};

/// Inverted residual: 1×1 expand, 3×3 depthwise (stride), 1×1 project, each with BN; a
/// shortcut (1×1 conv + BN when channels change) only when stride is 1.
class InvertedResidual : public nn::Cloneable<InvertedResidual> {
 public:
  InvertedResidual(int64_t in, int64_t out, int64_t expansion, int64_t stride);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Sequential> shortcut;

 private:
  int64_t in_, out_, expansion_, stride_;
};

class MobileNetV2 : public nn::Cloneable<MobileNetV2> {
 public:
  explicit MobileNetV2(SmallNetOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> layers;
  std::shared_ptr<nn::Linear> linear;

 private:
  SmallNetOptions options_;
};

/// Five 3×3 convolutions with ReLU and three max-pools, then a dropout MLP classifier over a
/// 4×4 adaptive average pool (so 28×28 and 32×32 inputs both work).
class AlexNet : public nn::Cloneable<AlexNet> {
 public:
  explicit AlexNet(SmallNetOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;

 private:
  SmallNetOptions options_;
};

/// LeNet-5 with ReLU and max-pooling; 28×28 inputs get padding 2 on the first convolution
/// (the classic MNIST setup), so both sizes reach the 16×5×5 feature map.
class LeNet5 : public nn::Cloneable<LeNet5> {
 public:
  explicit LeNet5(SmallNetOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;

 private:
  SmallNetOptions options_;
};

std::shared_ptr<MobileNetV2> mobilenet_v2(SmallNetOptions options = {});
std::shared_ptr<AlexNet> alexnet(SmallNetOptions options = {});
std::shared_ptr<LeNet5> lenet5(SmallNetOptions options = {});

}  // namespace qflow::models
