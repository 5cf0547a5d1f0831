#include "qflow/nn/init.h"

#include <cmath>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::nn::init {

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  QFLOW_CHECK(t.dim() >= 2, "init: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions (shape {})",
              t.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.sizes()[d];
  return {t.sizes()[1] * receptive, t.sizes()[0] * receptive};
}

namespace {
int64_t fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const int64_t f = mode == FanMode::FanIn ? in : out;
  QFLOW_CHECK(f > 0, "init: cannot initialise a tensor with zero fan (shape {})", t.sizes());
  return f;
}

void check_floating(const Tensor& t, std::string_view fn) {
  QFLOW_CHECK(t.defined() && is_floating(t.dtype()), "init.{}: expected a floating point tensor", fn);
}
}  // namespace

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_floating(t, "uniform_");
  QFLOW_CHECK(a <= b, "init.uniform_: expects a <= b, got a={} b={}", a, b);
  NoGradGuard no_grad;
  t.copy_(rand(t.sizes(), t.dtype(), gen).mul(b - a).add(a));
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  QFLOW_CHECK(std >= 0, "init.normal_: expects std >= 0, got {}", std);
  NoGradGuard no_grad;
  t.copy_(randn(t.sizes(), t.dtype(), gen).mul(std).add(mean));
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  const double bound = calculate_gain(nl, a) * std::sqrt(3.0 / static_cast<double>(fan(t, mode)));
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  return normal_(t, 0.0, calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan(t, mode))), gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), gen);
}

}  // namespace qflow::nn::init
