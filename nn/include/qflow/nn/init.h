#pragma once
// Parameter initialisation with PyTorch's formulas (torch.nn.init). All functions fill the
// tensor in place without recording history and draw from the given (or default) generator.
#include <string_view>
#include <utility>

#include "qflow/core/generator.h"
#include "qflow/core/tensor.h"

namespace qflow::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU };

/// Recommended gain for a nonlinearity (torch.nn.init.calculate_gain); `param` is the
/// negative slope for LeakyReLU.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);
/// (fan_in, fan_out) of a weight with at least 2 dims: dim 1 × receptive field, dim 0 × field.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/// U(-bound, bound), bound = gain·sqrt(3 / fan).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* gen = nullptr);
/// N(0, std²), std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* gen = nullptr);
/// U(-b, b), b = gain·sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace qflow::nn::init
