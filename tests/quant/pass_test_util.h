#pragma once
// Helpers shared by the quantization pass tests (tests/quant/pass_*_test.cpp).
#include <map>
#include <memory>
#include <string>

#include "qflow/fx/fx.h"
#include "qflow/quant/calibrate.h"
#include "qflow/quant/passes.h"
#include "qflow/quant/quant_meta.h"
#include "quant/quant_test_util.h"

namespace pass_test {

using namespace qflow;

/// call_module nodes of gm by the type of the module they run ({"QConvBN": 20, ...}).
inline std::map<std::string, int> module_counts(const fx::GraphModule& gm) {
  std::map<std::string, int> counts;
  for (const fx::Node* n : gm.graph())
    if (n->op() == fx::NodeOp::CallModule) ++counts[gm.get_submodule(n->target())->type_name()];
  return counts;
}

inline int count_of(const fx::GraphModule& gm, const std::string& type) {
  const auto counts = module_counts(gm);
  auto it = counts.find(type);
  return it == counts.end() ? 0 : it->second;
}

/// A zoo model built with a fixed seed and traced on `example`.
inline std::shared_ptr<fx::GraphModule> traced(const std::string& name, const Tensor& example, uint64_t seed = 0,
                                               const models::ModelOptions& options = {}) {
  manual_seed(seed);
  return fx::symbolic_trace(models::create(name, options), example);
}

/// `steps` SGD steps of cross_entropy on one fixed batch; returns the losses.
inline std::vector<double> train_steps(nn::Module& model, const Tensor& images, const Tensor& labels, int steps,
                                       double lr = 0.05) {
  model.train();
  nn::optim::SGD sgd(model.parameters(), nn::optim::SGDOptions{.lr = lr, .momentum = 0.9});
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model(images), labels);
    loss.backward();
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

/// |got - want| <= rtol * max|want| elementwise: relative to the output's scale, since logits
/// near zero have no meaningful relative error of their own.
inline void expect_close_to_scale(const Tensor& got, const Tensor& want, double rtol) {
  const Tensor w = want.to(DType::Float64);
  const double scale = w.abs().max().item<double>();
  quant_test::expect_close(got, want, 0.0, rtol * scale);
}

}  // namespace pass_test
