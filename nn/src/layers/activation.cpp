#include "qflow/nn/layers/activation.h"

#include "qflow/nn/functional.h"

namespace qflow::nn {

Tensor ReLU::forward(const Tensor& x) { return functional::relu(x); }
Tensor ReLU6::forward(const Tensor& x) { return functional::relu6(x); }
Tensor Hardswish::forward(const Tensor& x) { return functional::hardswish(x); }
Tensor Hardsigmoid::forward(const Tensor& x) { return functional::hardsigmoid(x); }
Tensor SiLU::forward(const Tensor& x) { return functional::silu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return functional::sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return functional::tanh(x); }

Tensor Flatten::forward(const Tensor& x) { return functional::flatten(x, options_.start_dim, options_.end_dim); }
std::string Flatten::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", options_.start_dim, options_.end_dim);
}

Dropout::Dropout(DropoutOptions options) : options_(options) {
  QFLOW_CHECK(options_.p >= 0 && options_.p <= 1, "Dropout: probability has to be between 0 and 1, but got {}", options_.p);
}
Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, options_.p, is_training()); }
std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=False", options_.p); }

}  // namespace qflow::nn
