#pragma once
// A zoo model taken the whole road to its integer deploy model, as users take it: traced, made
// a QAT model, trained a few SGD steps (so the observers and weights move off their initial
// values), deployed and put in eval mode. Shared by the integer deploy tests.
#include <memory>
#include <ostream>
#include <string>

#include "quant/pass_test_util.h"

namespace pass_test {

/// A zoo model and the input shape its integer deploy tests use: images as small as the model
/// allows, so that 5 configurations × 3 convolution engines stay within the suite's budget.
struct ZooInput {
  std::string model;
  int64_t channels = 3, image_size = 32;
  int64_t train_batch = 4;  // the QAT steps' batch
};

/// The name a parametrized test gets for it ("mobilenet_v2").
inline std::string zoo_input_name(const ZooInput& z) { return z.model; }

/// How gtest prints it ("mobilenet_v2 on 3x16x16"), instead of its bytes.
inline void PrintTo(const ZooInput& z, std::ostream* os) {
  *os << z.model << " on " << z.channels << "x" << z.image_size << "x" << z.image_size;
}

/// ResNet18 at CIFAR size; MobileNetV2 (depthwise convolutions) at 16×16, its three stride-2
/// stages leaving 2×2 for the last convolutions; LeNet5 at Fashion-MNIST's 1×28×28.
inline const std::vector<ZooInput>& integer_zoo() {
  static const std::vector<ZooInput> zoo{{"resnet18", 3, 32, 4}, {"mobilenet_v2", 3, 16, 4}, {"lenet5", 1, 28, 8}};
  return zoo;
}

inline Tensor zoo_batch(const ZooInput& z, int64_t batch) { return randn({batch, z.channels, z.image_size, z.image_size}); }

/// The eval-mode deploy model of `z`'s QAT model (configuration `qc`) trained `steps` SGD steps
/// on one random batch. Seeds fixed: the same call builds the same model.
inline std::shared_ptr<fx::GraphModule> trained_deploy(const ZooInput& z, const quant::QConfig& qc, int steps = 2) {
  manual_seed(11);
  const Tensor example = zoo_batch(z, 2);
  const models::ModelOptions options{.num_classes = 10, .in_channels = z.channels, .image_size = z.image_size};
  auto float_gm = traced(z.model, example, 2, options);
  auto qat = quant::quantization_aware_training(*float_gm, example, qc);
  manual_seed(12);
  train_steps(*qat, zoo_batch(z, z.train_batch), randint(0, 10, {z.train_batch}), steps, 0.02);
  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, example, qc);
  deploy->eval();
  return deploy;
}

}  // namespace pass_test
