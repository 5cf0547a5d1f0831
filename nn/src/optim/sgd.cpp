#include "qflow/nn/optim/sgd.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/ops.h"

namespace qflow::nn::optim {

namespace {
void check(const SGDOptions& o) {
  QFLOW_CHECK(o.momentum >= 0, "SGD: invalid momentum {}", o.momentum);
  QFLOW_CHECK(o.weight_decay >= 0, "SGD: invalid weight_decay {}", o.weight_decay);
  QFLOW_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD: nesterov momentum requires a momentum and zero dampening");
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) {
  check(options);
  add_group(std::move(params), options);
}

SGD::SGD(std::vector<Group> groups) {
  for (auto& g : groups) {
    check(g.options);
    add_group(std::move(g.params), g.options);
  }
}

void SGD::step() {
  NoGradGuard no_grad;
  size_t index = 0;
  for (Group& group : groups_) {
    const SGDOptions& o = group.options;
    for (Tensor& p : group.params) {
      const size_t i = index++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      if (o.momentum != 0) {
        auto& st = state(i);
        auto it = st.find("momentum_buffer");
        if (it == st.end()) {
          it = st.emplace("momentum_buffer", g.clone()).first;
        } else {
          it->second.mul_(o.momentum).add_(g, 1.0 - o.dampening);
        }
        g = o.nesterov ? g.add(it->second, o.momentum) : it->second;
      }
      p.add_(g, -o.lr);
    }
  }
}

}  // namespace qflow::nn::optim
