#include "qflow/nn/optim/adam.h"

#include <cmath>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::nn::optim {

namespace {
void check(const AdamOptions& o) {
  QFLOW_CHECK(o.eps >= 0, "Adam: invalid epsilon {}", o.eps);
  QFLOW_CHECK(o.beta1 >= 0 && o.beta1 < 1, "Adam: invalid beta1 {}", o.beta1);
  QFLOW_CHECK(o.beta2 >= 0 && o.beta2 < 1, "Adam: invalid beta2 {}", o.beta2);
  QFLOW_CHECK(o.weight_decay >= 0, "Adam: invalid weight_decay {}", o.weight_decay);
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) {
  check(options);
  add_group(std::move(params), options);
}

Adam::Adam(std::vector<Group> groups) {
  for (auto& g : groups) {
    check(g.options);
    add_group(std::move(g.params), g.options);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options) {
  decoupled_weight_decay_ = true;
}
AdamW::AdamW(std::vector<Group> groups) : Adam(std::move(groups)) { decoupled_weight_decay_ = true; }

void Adam::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (Group& group : groups_) {
    const AdamOptions& o = group.options;
    for (Tensor& p : group.params) {
      const size_t i = index++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      auto& st = state(i);
      if (!st.count("step")) {
        st["step"] = scalar_tensor(0.0, DType::Float64);
        st["exp_avg"] = zeros_like(p);
        st["exp_avg_sq"] = zeros_like(p);
      }
      Tensor& step_t = st["step"];
      step_t.add_(1.0);
      const double step = step_t.item<double>();
      if (o.weight_decay != 0) {
        if (decoupled_weight_decay_) p.mul_(1.0 - o.lr * o.weight_decay);
        else g = g.add(p, o.weight_decay);
      }
      Tensor& m = st["exp_avg"];
      Tensor& v = st["exp_avg_sq"];
      m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
      v.mul_(o.beta2).add_(g.mul(g), 1.0 - o.beta2);
      const double bias1 = 1.0 - std::pow(o.beta1, step);
      const double bias2 = 1.0 - std::pow(o.beta2, step);
      const Tensor denom = v.sqrt().div(std::sqrt(bias2)).add(o.eps);
      p.add_(m.div(denom), -o.lr / bias1);
    }
  }
}

}  // namespace qflow::nn::optim
