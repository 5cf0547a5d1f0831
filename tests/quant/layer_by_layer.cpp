// compare_layer_inputs: see layer_by_layer.h.
#include "quant/layer_by_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <unordered_map>

#include "qflow/fx/interpreter.h"
#include "qflow/qflow.h"
#include "qflow/quant/deploy.h"
#include "qflow/quant/fake_quantize.h"

namespace pass_test {

using namespace qflow;

namespace {

// The input grid of a deployed layer, or nothing for any other module.
struct InputGrid {
  Tensor scale, zero_point;
  quant::QConfig qconfig;
  bool integer = false;
};

std::optional<InputGrid> input_grid(const nn::ModulePtr& m) {
  if (auto c = std::dynamic_pointer_cast<quant::DConv2d>(m))
    return InputGrid{c->input_scale, c->input_zero_point, c->qconfig().activations(), c->runs_integer()};
  if (auto l = std::dynamic_pointer_cast<quant::DLinear>(m))
    return InputGrid{l->input_scale, l->input_zero_point, l->qconfig().activations(), l->runs_integer()};
  return std::nullopt;
}

std::vector<int64_t> integers_of(const Tensor& t) { return to_vector<int64_t>(t.contiguous().to(DType::Int64)); }

// A copy of a value's tensors: a layer may write its input (a residual summed in place,
// Note [Integer activations]), and the recorded simulation must stay as it was computed.
Value copy_of(const Value& v) {
  if (v.is_tensor()) return Value(v.tensor().defined() ? v.tensor().clone() : Tensor());
  if (!v.is_tensor_list()) return v;
  TensorList list;
  for (const Tensor& t : v.tensor_list()) list.push_back(t.defined() ? t.clone() : Tensor());
  return Value(std::move(list));
}

// The simulation: a copy of every node's outputs, kept past their last use.
class Recorder : public fx::Interpreter {
 public:
  using Interpreter::Interpreter;
  std::unordered_map<const fx::Node*, Stack> values;

 protected:
  Stack run_node(fx::Node& n) override {
    Stack out = Interpreter::run_node(n);
    Stack& kept = values[&n];
    for (const Value& v : out) kept.push_back(copy_of(v));
    return out;
  }
};

// The integer model; compares what reaches each deployed layer with the simulation's value
// there. In lockstep, each deployed layer is then fed the simulation's inputs (one layer's
// rounding at a time); otherwise the integer model runs on its own values, end to end.
class IntegerRun : public fx::Interpreter {
 public:
  IntegerRun(fx::GraphModule& gm, const std::unordered_map<const fx::Node*, Stack>& simulated, bool lockstep)
      : Interpreter(gm), simulated_(simulated), lockstep_(lockstep) {}
  std::vector<LayerInputIntegers> layers;

 protected:
  Stack call_module(fx::Node& n, const Stack& args, const fx::ValueKwargs& kwargs) override {
    const auto grid = input_grid(module().get_submodule(n.target()));
    if (!grid) return Interpreter::call_module(n, args, kwargs);
    Stack fed = args;
    for (size_t i = 0; i < n.args().size(); ++i)
      if (const fx::Node* in = n.args()[i].node()) fed[i] = copy_of(simulated_.at(in).at(0));
    layers.push_back(compare(n, *grid, args.at(0).tensor(), fed.at(0).tensor()));
    return Interpreter::call_module(n, lockstep_ ? fed : args, kwargs);
  }

 private:
  static LayerInputIntegers compare(const fx::Node& n, const InputGrid& g, const Tensor& reached, const Tensor& simulated) {
    const quant::QConfig& qc = g.qconfig;
    const DType type = quant::detail::input_integer_type(qc);
    const auto quantized = [&](const Tensor& x) {
      return quant::quantize(x, g.scale, g.zero_point, qc.quant_min(), qc.quant_max(), 0, type);
    };
    const bool given_integers = reached.dtype() == DType::UInt8 || reached.dtype() == DType::Int8;
    const std::vector<int64_t> got = integers_of(given_integers ? reached : quantized(reached));
    const std::vector<int64_t> want = integers_of(quantized(simulated));
    const std::vector<double> value = to_vector<double>(simulated.contiguous().to(DType::Float64));
    const double scale = g.scale.item<double>();
    LayerInputIntegers r{.node = n.name(), .integer = g.integer, .elements = static_cast<int64_t>(got.size())};
    for (size_t i = 0; i < got.size(); ++i) {
      if (!std::isfinite(value[i])) {  // NaN or Inf never agrees, whatever integers it quantized to
        ++r.differ, ++r.differ_by_more_than_one;
        r.tie_distance = std::numeric_limits<double>::infinity();
        continue;
      }
      if (got[i] == want[i]) continue;
      ++r.differ;
      if (std::abs(got[i] - want[i]) > 1) ++r.differ_by_more_than_one;
      const double steps = value[i] / scale;
      r.tie_distance = std::max(r.tie_distance, std::abs(steps - std::floor(steps) - 0.5));
    }
    return r;
  }

  const std::unordered_map<const fx::Node*, Stack>& simulated_;
  bool lockstep_;
};

std::vector<LayerInputIntegers> compare(fx::GraphModule& deploy, const Tensor& x, bool lockstep) {
  NoGradGuard no_grad;
  quant::set_integer(deploy, false);
  Recorder simulation(deploy);
  simulation.run(x);
  quant::set_integer(deploy, true);
  IntegerRun integer(deploy, simulation.values, lockstep);
  integer.run(x);
  return integer.layers;
}

}  // namespace

std::vector<LayerInputIntegers> compare_layer_inputs(fx::GraphModule& deploy, const Tensor& x) {
  return compare(deploy, x, /*lockstep=*/true);
}

std::vector<LayerInputIntegers> compare_layer_inputs_end_to_end(fx::GraphModule& deploy, const Tensor& x) {
  return compare(deploy, x, /*lockstep=*/false);
}

const LayerInputIntegers* first_difference(const std::vector<LayerInputIntegers>& layers) {
  for (const LayerInputIntegers& l : layers)
    if (l.differ > 0) return &l;
  return nullptr;
}

void expect_end_to_end_agreement(fx::GraphModule& deploy, const Tensor& x) {
  const std::vector<LayerInputIntegers> layers = compare_layer_inputs_end_to_end(deploy, x);
  ASSERT_FALSE(layers.empty()) << "the model has no deployed layer";
  if (const LayerInputIntegers* first = first_difference(layers)) {
    EXPECT_EQ(first->differ_by_more_than_one, 0) << first->node;
    EXPECT_LE(first->tie_distance, kTieSteps) << first->node << ", the first layer whose input differs end to end: "
                                              << first->differ << " of " << first->elements << " integers";
    EXPECT_LE(first->differ, first->elements / 100000 + 1) << first->node;
    return;
  }
  NoGradGuard no_grad;
  quant::set_integer(deploy, false);
  const Tensor simulated = deploy(x);
  quant::set_integer(deploy, true);
  const Tensor integer = deploy(x);
  EXPECT_EQ(to_vector<int64_t>(integer.argmax(1)), to_vector<int64_t>(simulated.argmax(1)));
  const std::vector<double> got = to_vector<double>(integer.to(DType::Float64));
  const std::vector<double> want = to_vector<double>(simulated.to(DType::Float64));
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)  // written so that a NaN fails
    EXPECT_TRUE(std::abs(got[i] - want[i]) <= 1e-5 * scale) << "output " << i << ": " << got[i] << " against " << want[i];
}

}  // namespace pass_test
