#include "integer_agreement.h"

#include <fmt/format.h>

#include "qflow/qflow.h"

namespace qflow::tools {

IntegerAgreement measure_integer_agreement(nn::Module& deploy, data::DataLoader& loader) {
  NoGradGuard no_grad;
  deploy.eval();
  IntegerAgreement a;
  a.layers = static_cast<int64_t>(quant::set_integer(deploy, true));
  a.integer_layers = a.layers - static_cast<int64_t>(quant::float_layers(deploy).size());
  int64_t integer_correct = 0, simulated_correct = 0, same = 0;
  for (data::Batch& b : loader) {
    quant::set_integer(deploy, true);
    const Tensor integer = deploy(b.images).argmax(1);
    quant::set_integer(deploy, false);
    const Tensor simulated = deploy(b.images).argmax(1);
    integer_correct += integer.eq(b.labels).sum().item<int64_t>();
    simulated_correct += simulated.eq(b.labels).sum().item<int64_t>();
    same += integer.eq(simulated).sum().item<int64_t>();
    a.images += b.size();
  }
  quant::set_integer(deploy, true);
  if (a.images > 0) {
    const auto percent = [&a](int64_t n) { return 100.0 * static_cast<double>(n) / static_cast<double>(a.images); };
    a.integer_accuracy = percent(integer_correct);
    a.simulated_accuracy = percent(simulated_correct);
    a.same_argmax = percent(same);
  }
  return a;
}

std::string integer_stage(const std::string& stage, const IntegerAgreement& a) {
  if (a.integer_layers == 0) return stage + " (float)";
  if (a.integer_layers == a.layers) return stage + " (int8)";
  return fmt::format("{} ({}/{} int8)", stage, a.integer_layers, a.layers);
}

}  // namespace qflow::tools
