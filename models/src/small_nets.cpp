#include "qflow/models/small_nets.h"

namespace qflow::models {

InvertedResidual::InvertedResidual(int64_t in, int64_t out, int64_t expansion, int64_t stride)
    : in_(in), out_(out), expansion_(expansion), stride_(stride) {
  reset();
}

void InvertedResidual::reset() {
  const int64_t planes = expansion_ * in_;
  conv1 = register_module("conv1", nn::Conv2d({.in = in_, .out = planes, .kernel = 1, .bias = false}));
  bn1 = register_module("bn1", nn::BatchNorm2d({.features = planes}));
  conv2 = register_module("conv2", nn::Conv2d({.in = planes, .out = planes, .kernel = 3, .stride = stride_, .padding = 1, .groups = planes, .bias = false}));
  bn2 = register_module("bn2", nn::BatchNorm2d({.features = planes}));
  conv3 = register_module("conv3", nn::Conv2d({.in = planes, .out = out_, .kernel = 1, .bias = false}));
  bn3 = register_module("bn3", nn::BatchNorm2d({.features = out_}));
  auto s = std::make_shared<nn::Sequential>();
  if (stride_ == 1 && in_ != out_) {
    s->push_back(nn::Conv2d({.in = in_, .out = out_, .kernel = 1, .bias = false}));
    s->push_back(nn::BatchNorm2d({.features = out_}));
  }
  shortcut = register_module("shortcut", s);
}

Tensor InvertedResidual::forward(const Tensor& x) {
  Tensor out = F::relu((*bn1)((*conv1)(x)));
  out = F::relu((*bn2)((*conv2)(out)));
  out = (*bn3)((*conv3)(out));
  return stride_ == 1 ? out + (*shortcut)(x) : out;
}

MobileNetV2::MobileNetV2(SmallNetOptions options) : options_(options) { reset(); }

void MobileNetV2::reset() {
  // (expansion, out_planes, num_blocks, stride); the CIFAR variant keeps stride 1 early on.
  static constexpr int64_t kConfig[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 1}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                            {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  conv1 = register_module("conv1", nn::Conv2d({.in = options_.in_channels, .out = 32, .kernel = 3, .stride = 1, .padding = 1, .bias = false}));
  bn1 = register_module("bn1", nn::BatchNorm2d({.features = 32}));
  auto seq = std::make_shared<nn::Sequential>();
  int64_t in = 32;
  for (const auto& c : kConfig)
    for (int64_t i = 0; i < c[2]; ++i) {
      seq->push_back(std::make_shared<InvertedResidual>(in, c[1], c[0], i == 0 ? c[3] : 1));
      in = c[1];
    }
  layers = register_module("layers", seq);
  conv2 = register_module("conv2", nn::Conv2d({.in = 320, .out = 1280, .kernel = 1, .bias = false}));
  bn2 = register_module("bn2", nn::BatchNorm2d({.features = 1280}));
  linear = register_module("linear", nn::Linear({.in = 1280, .out = options_.num_classes}));
}

Tensor MobileNetV2::forward(const Tensor& x) {
  Tensor out = F::relu((*bn1)((*conv1)(x)));
  out = (*layers)(out);
  out = F::relu((*bn2)((*conv2)(out)));
  out = F::adaptive_avg_pool2d(out, {1, 1});
  out = out.view({out.size(0), -1});
  return (*linear)(out);
}

AlexNet::AlexNet(SmallNetOptions options) : options_(options) { reset(); }

void AlexNet::reset() {
  features = register_module(
      "features", nn::Sequential(nn::Conv2d({.in = options_.in_channels, .out = 64, .kernel = 3, .padding = 1}), nn::ReLU(),
                                 nn::MaxPool2d({.kernel = 2}), nn::Conv2d({.in = 64, .out = 192, .kernel = 3, .padding = 1}),
                                 nn::ReLU(), nn::MaxPool2d({.kernel = 2}),
                                 nn::Conv2d({.in = 192, .out = 384, .kernel = 3, .padding = 1}), nn::ReLU(),
                                 nn::Conv2d({.in = 384, .out = 256, .kernel = 3, .padding = 1}), nn::ReLU(),
                                 nn::Conv2d({.in = 256, .out = 256, .kernel = 3, .padding = 1}), nn::ReLU(),
                                 nn::MaxPool2d({.kernel = 2})));
  avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d({.output = 4}));
  classifier = register_module(
      "classifier", nn::Sequential(nn::Dropout(), nn::Linear({.in = 256 * 4 * 4, .out = 1024}), nn::ReLU(), nn::Dropout(),
                                   nn::Linear({.in = 1024, .out = 1024}), nn::ReLU(),
                                   nn::Linear({.in = 1024, .out = options_.num_classes})));
}

Tensor AlexNet::forward(const Tensor& x) {
  Tensor out = (*avgpool)((*features)(x));
  out = out.flatten(1);  // not view: on the GPU activations are channels-last (Note [Channels-last on the GPU])
  return (*classifier)(out);
}

LeNet5::LeNet5(SmallNetOptions options) : options_(options) {
  QFLOW_CHECK(options_.image_size == 28 || options_.image_size == 32, "lenet5: image_size must be 28 or 32, got {}",
              options_.image_size);
  reset();
}

void LeNet5::reset() {
  const int64_t pad = options_.image_size == 28 ? 2 : 0;
  conv1 = register_module("conv1", nn::Conv2d({.in = options_.in_channels, .out = 6, .kernel = 5, .padding = pad}));
  conv2 = register_module("conv2", nn::Conv2d({.in = 6, .out = 16, .kernel = 5}));
  fc1 = register_module("fc1", nn::Linear({.in = 16 * 5 * 5, .out = 120}));
  fc2 = register_module("fc2", nn::Linear({.in = 120, .out = 84}));
  fc3 = register_module("fc3", nn::Linear({.in = 84, .out = options_.num_classes}));
}

Tensor LeNet5::forward(const Tensor& x) {
  Tensor out = F::max_pool2d(F::relu((*conv1)(x)), {2});
  out = F::max_pool2d(F::relu((*conv2)(out)), {2});
  out = out.flatten(1);  // not view: on the GPU activations are channels-last (Note [Channels-last on the GPU])
  out = F::relu((*fc1)(out));
  out = F::relu((*fc2)(out));
  return (*fc3)(out);
}

std::shared_ptr<MobileNetV2> mobilenet_v2(SmallNetOptions o) { return std::make_shared<MobileNetV2>(o); }
std::shared_ptr<AlexNet> alexnet(SmallNetOptions o) { return std::make_shared<AlexNet>(o); }
std::shared_ptr<LeNet5> lenet5(SmallNetOptions o) { return std::make_shared<LeNet5>(o); }

}  // namespace qflow::models
