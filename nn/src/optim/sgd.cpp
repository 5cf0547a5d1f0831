#include "qflow/nn/optim/sgd.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
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
    // One sgd_update_ call per group and kind of step: a GPU updates them all in one launch.
    // Parameters whose momentum buffer is new take the gradient as it (first_step).
    struct Batch {
      TensorList params, grads, buffers;
    } fresh, running;
    for (Tensor& p : group.params) {
      const size_t i = index++;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Batch* batch = &running;
      if (o.momentum != 0) {
        auto& st = state(i);
        auto it = st.find("momentum_buffer");
        if (it == st.end()) {
          it = st.emplace("momentum_buffer", empty_like(g)).first;
          batch = &fresh;
        }
        batch->buffers.push_back(it->second);
      }
      batch->params.push_back(p);
      batch->grads.push_back(g);
    }
    for (const Batch* b : {&fresh, &running}) {
      if (b->params.empty()) continue;
      sgd_update_(b->params, b->grads, b->buffers, o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov,
                  /*first_step=*/b == &fresh);
    }
  }
}

}  // namespace qflow::nn::optim
