#include "qflow/nn/layers/linear.h"

#include <cmath>

#include "qflow/core/factory.h"
#include "qflow/nn/functional.h"
#include "qflow/nn/init.h"

namespace qflow::nn {

Linear::Linear(LinearOptions options) : options_(options) {
  QFLOW_CHECK(options_.in > 0 && options_.out > 0, "Linear: in and out features must be positive, got in={} out={}",
              options_.in, options_.out);
  reset();
}

// Initializes before registering: while clone() rebuilds a copy, register_parameter returns
// the source's values, which must not be overwritten (see Note [Module cloning]).
void Linear::reset() {
  Tensor w = empty({options_.out, options_.in});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  weight = register_parameter("weight", w);
  if (options_.bias) {
    Tensor b = empty({options_.out});
    const double bound = 1.0 / std::sqrt(static_cast<double>(options_.in));
    init::uniform_(b, -bound, bound);
    bias = register_parameter("bias", b);
  } else {
    bias = Tensor();
  }
}

Tensor Linear::forward(const Tensor& x) { return functional::linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", options_.in, options_.out, options_.bias ? "True" : "False");
}

}  // namespace qflow::nn
