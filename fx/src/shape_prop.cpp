#include "qflow/fx/shape_prop.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/generator.h"

namespace qflow::fx {

namespace {

void add_metas(const Value& v, std::vector<TensorMeta>& out) {
  if (v.is_tensor() && v.tensor().defined()) out.push_back({v.tensor().sizes(), v.tensor().dtype()});
  if (v.is_tensor_list())
    for (const Tensor& t : v.tensor_list())
      if (t.defined()) out.push_back({t.sizes(), t.dtype()});
}

}  // namespace

TensorList ShapeProp::run(const TensorList& inputs) {
  NoGradGuard no_grad;
  // A train-mode BatchNorm updates its running statistics and Dropout draws random numbers;
  // measuring shapes must not, so both are put back afterwards.
  std::vector<std::pair<Tensor, Tensor>> saved;
  for (const auto& [name, b] : module().named_buffers()) saved.emplace_back(b, b.clone());
  Generator& gen = current_generator();
  const uint64_t seed = gen.seed(), offset = gen.offset();
  struct Restore {
    std::vector<std::pair<Tensor, Tensor>>& saved;
    Generator& gen;
    uint64_t seed, offset;
    ~Restore() {
      for (auto& [live, copy] : saved) live.copy_(copy);
      gen.set_state(seed, offset);
    }
  } restore{saved, gen, seed, offset};
  return Interpreter::run(inputs);
}

Stack ShapeProp::run_node(Node& node) {
  Stack out = Interpreter::run_node(node);
  std::vector<TensorMeta> metas;
  for (const Value& v : out) add_metas(v, metas);
  node.meta().outputs = std::move(metas);
  return out;
}

}  // namespace qflow::fx
