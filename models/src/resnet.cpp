#include "qflow/models/resnet.h"

namespace qflow::models {

namespace {
std::shared_ptr<nn::Sequential> make_shortcut(int64_t in, int64_t out, int64_t stride) {
  auto s = std::make_shared<nn::Sequential>();
  if (stride != 1 || in != out) {
    s->push_back(nn::Conv2d({.in = in, .out = out, .kernel = 1, .stride = stride, .bias = false}));
    s->push_back(nn::BatchNorm2d({.features = out}));
  }
  return s;
}
}  // namespace

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  reset();
}

void BasicBlock::reset() {
  conv1 = register_module("conv1", nn::Conv2d({.in = in_planes_, .out = planes_, .kernel = 3, .stride = stride_, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", nn::BatchNorm2d({.features = planes_}));
  conv2 = register_module("conv2", nn::Conv2d({.in = planes_, .out = planes_, .kernel = 3, .stride = 1, .padding = 1, .bias = false}));
  bn2 = register_module("bn2", nn::BatchNorm2d({.features = planes_}));
  shortcut = register_module("shortcut", make_shortcut(in_planes_, planes_ * kExpansion, stride_));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = F::relu((*bn1)((*conv1)(x)));
  out = (*bn2)((*conv2)(out));
  out = out + (*shortcut)(x);
  return F::relu(out);
}

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride)
    : in_planes_(in_planes), planes_(planes), stride_(stride) {
  reset();
}

void Bottleneck::reset() {
  conv1 = register_module("conv1", nn::Conv2d({.in = in_planes_, .out = planes_, .kernel = 1, .bias = false}));
  bn1 = register_module("bn1", nn::BatchNorm2d({.features = planes_}));
  conv2 = register_module("conv2", nn::Conv2d({.in = planes_, .out = planes_, .kernel = 3, .stride = stride_, .padding = 1, .bias = false}));
  bn2 = register_module("bn2", nn::BatchNorm2d({.features = planes_}));
  conv3 = register_module("conv3", nn::Conv2d({.in = planes_, .out = planes_ * kExpansion, .kernel = 1, .bias = false}));
  bn3 = register_module("bn3", nn::BatchNorm2d({.features = planes_ * kExpansion}));
  shortcut = register_module("shortcut", make_shortcut(in_planes_, planes_ * kExpansion, stride_));
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = F::relu((*bn1)((*conv1)(x)));
  out = F::relu((*bn2)((*conv2)(out)));
  out = (*bn3)((*conv3)(out));
  out = out + (*shortcut)(x);
  return F::relu(out);
}

ResNet::ResNet(Block block, std::vector<int64_t> num_blocks, ResNetOptions options)
    : block_(block), num_blocks_(std::move(num_blocks)), options_(options) {
  QFLOW_CHECK(num_blocks_.size() == 4, "ResNet: expected 4 stage sizes, got {}", num_blocks_);
  reset();
}

std::shared_ptr<nn::Sequential> ResNet::make_layer(int64_t planes, int64_t blocks, int64_t stride, int64_t& in_planes) {
  auto layer = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t s = i == 0 ? stride : 1;
    if (block_ == Block::Basic) {
      layer->push_back(std::make_shared<BasicBlock>(in_planes, planes, s));
      in_planes = planes * BasicBlock::kExpansion;
    } else {
      layer->push_back(std::make_shared<Bottleneck>(in_planes, planes, s));
      in_planes = planes * Bottleneck::kExpansion;
    }
  }
  return layer;
}

void ResNet::reset() {
  int64_t in_planes = 64;
  conv1 = register_module("conv1", nn::Conv2d({.in = options_.in_channels, .out = 64, .kernel = 3, .stride = 1, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", nn::BatchNorm2d({.features = 64}));
  layer1 = register_module("layer1", make_layer(64, num_blocks_[0], 1, in_planes));
  layer2 = register_module("layer2", make_layer(128, num_blocks_[1], 2, in_planes));
  layer3 = register_module("layer3", make_layer(256, num_blocks_[2], 2, in_planes));
  layer4 = register_module("layer4", make_layer(512, num_blocks_[3], 2, in_planes));
  linear = register_module("linear", nn::Linear({.in = in_planes, .out = options_.num_classes}));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor out = F::relu((*bn1)((*conv1)(x)));
  out = (*layer4)((*layer3)((*layer2)((*layer1)(out))));
  out = F::avg_pool2d(out, {4});
  out = out.view({out.size(0), -1});
  return (*linear)(out);
}

std::shared_ptr<ResNet> resnet18(ResNetOptions o) { return std::make_shared<ResNet>(ResNet::Block::Basic, std::vector<int64_t>{2, 2, 2, 2}, o); }
std::shared_ptr<ResNet> resnet34(ResNetOptions o) { return std::make_shared<ResNet>(ResNet::Block::Basic, std::vector<int64_t>{3, 4, 6, 3}, o); }
std::shared_ptr<ResNet> resnet50(ResNetOptions o) { return std::make_shared<ResNet>(ResNet::Block::Bottleneck, std::vector<int64_t>{3, 4, 6, 3}, o); }

}  // namespace qflow::models
