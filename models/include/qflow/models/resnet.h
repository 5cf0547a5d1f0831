#pragma once
// The CIFAR ResNet behind the OneFlow and PyTorch CIFAR-10 results (kuangliu/pytorch-cifar):
// a 3×3 stem with 64 channels and no max-pool, four stages of residual blocks, avg_pool2d(4),
// view(N, −1), linear. Parameter names and shapes equal that PyTorch definition, so weights
// move between the two through safetensors.
#include <memory>

#include "qflow/nn/nn.h"

namespace qflow::models {

/// conv3×3-BN-ReLU-conv3×3-BN plus a shortcut (1×1 conv + BN when the shape changes).
class BasicBlock : public nn::Cloneable<BasicBlock> {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> shortcut;

 private:
  int64_t in_planes_, planes_, stride_;
};

/// 1×1 reduce, 3×3, 1×1 expand (×4), each with BN, plus a shortcut.
class Bottleneck : public nn::Cloneable<Bottleneck> {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Sequential> shortcut;

 private:
  int64_t in_planes_, planes_, stride_;
};

struct ResNetOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
};

class ResNet : public nn::Cloneable<ResNet> {
 public:
  enum class Block { Basic, Bottleneck };
  ResNet(Block block, std::vector<int64_t> num_blocks, ResNetOptions options);
  void reset();
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::Linear> linear;

 private:
  std::shared_ptr<nn::Sequential> make_layer(int64_t planes, int64_t blocks, int64_t stride, int64_t& in_planes);
  Block block_;
  std::vector<int64_t> num_blocks_;
  ResNetOptions options_;
};

std::shared_ptr<ResNet> resnet18(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet34(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet50(ResNetOptions options = {});

}  // namespace qflow::models
