#include "qflow/nn/optim/optimizer.h"

#include <algorithm>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/nn/optim/adam.h"
#include "qflow/nn/optim/sgd.h"

namespace qflow::nn::optim {

void Optimizer::zero_grad() {
  for (size_t g = 0; g < num_groups(); ++g)
    for (const Tensor& p : group_params(g)) p.set_grad(Tensor());
}

namespace detail {

namespace {
// The hyper-parameters of each options struct, by name, for the state dict.
template <typename F> void visit_options(SGDOptions& o, F&& f) {
  f("lr", o.lr); f("momentum", o.momentum); f("dampening", o.dampening); f("weight_decay", o.weight_decay);
  double nesterov = o.nesterov ? 1.0 : 0.0;
  f("nesterov", nesterov);
  o.nesterov = nesterov != 0.0;
}
template <typename F> void visit_options(AdamOptions& o, F&& f) {
  f("lr", o.lr); f("beta1", o.beta1); f("beta2", o.beta2); f("eps", o.eps); f("weight_decay", o.weight_decay);
}

const Tensor* find(const NamedTensors& state, const std::string& key) {
  for (const auto& [k, v] : state)
    if (k == key) return &v;
  return nullptr;
}

// The parameter number of "state.<index>.<name>": decimal digits only, no overflow.
size_t parameter_index(const std::string& key, size_t dot) {
  const std::string digits = key.substr(6, dot - 6);
  QFLOW_CHECK(!digits.empty() && digits.size() <= 9 && digits.find_first_not_of("0123456789") == std::string::npos,
              "optimizer.load_state_dict: malformed key '{}' (expected state.<parameter number>.<buffer>)", key);
  return std::stoul(digits);
}
}  // namespace

template <typename Options>
void OptimizerImpl<Options>::add_group(std::vector<Tensor> params, Options options) {
  QFLOW_CHECK(!params.empty(), "optimizer: a parameter group has no parameters");
  QFLOW_CHECK(options.lr >= 0, "optimizer: invalid learning rate {}", options.lr);
  for (const Tensor& p : params) {
    QFLOW_CHECK(p.defined() && is_floating(p.dtype()), "optimizer: parameters must be defined floating point tensors");
    for (const Group& g : groups_)
      for (const Tensor& q : g.params)
        QFLOW_CHECK(!q.is_same(p), "optimizer: some parameters appear in more than one parameter group");
  }
  groups_.push_back(Group{std::move(params), options});
}

template <typename Options>
NamedTensors OptimizerImpl<Options>::state_dict() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Options o = groups_[g].options;
    visit_options(o, [&](const char* name, double& v) {
      out.emplace_back(fmt::format("param_groups.{}.{}", g, name), scalar_tensor(v, DType::Float64));
    });
  }
  for (const auto& [index, buffers] : state_)
    for (const auto& [name, t] : buffers) out.emplace_back(fmt::format("state.{}.{}", index, name), t.clone());
  return out;
}

template <typename Options>
void OptimizerImpl<Options>::load_state_dict(const NamedTensors& state) {
  // Validate everything first so a bad dict leaves the optimizer untouched.
  std::vector<Options> options;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Options o = groups_[g].options;
    visit_options(o, [&](const char* name, double& v) {
      const std::string key = fmt::format("param_groups.{}.{}", g, name);
      const Tensor* t = find(state, key);
      QFLOW_CHECK(t != nullptr && t->numel() == 1, "optimizer.load_state_dict: missing or malformed entry '{}'", key);
      v = t->item<double>();
    });
    options.push_back(o);
  }
  std::vector<Tensor> params;
  for (const Group& g : groups_) params.insert(params.end(), g.params.begin(), g.params.end());
  const std::vector<BufferSpec> specs = buffer_specs();
  std::string names;
  for (const BufferSpec& b : specs) names += (names.empty() ? "" : ", ") + std::string(b.name);
  std::map<size_t, std::map<std::string, Tensor>> new_state;
  for (const auto& [key, t] : state) {
    if (key.rfind("state.", 0) != 0) continue;
    const size_t dot = key.find('.', 6);
    QFLOW_CHECK(dot != std::string::npos, "optimizer.load_state_dict: malformed key '{}'", key);
    const size_t index = parameter_index(key, dot);
    QFLOW_CHECK(index < params.size(), "optimizer.load_state_dict: '{}' refers to parameter {} but the optimizer has {}", key,
                index, params.size());
    const std::string name = key.substr(dot + 1);
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const BufferSpec& b) { return name == b.name; });
    QFLOW_CHECK(spec != specs.end(), "optimizer.load_state_dict: unknown entry '{}' (this optimizer keeps {})", key, names);
    const Tensor& p = params[index];
    if (spec->scalar) {
      QFLOW_CHECK(t.numel() == 1 && t.dtype() == DType::Float64,
                  "optimizer.load_state_dict: '{}' must be one float64, got dtype {} and shape {}", key, t.dtype(),
                  t.sizes());
    } else {
      QFLOW_CHECK(t.sizes() == p.sizes() && t.dtype() == p.dtype(),
                  "optimizer.load_state_dict: '{}' has dtype {} and shape {} but parameter {} has dtype {} and shape {}",
                  key, t.dtype(), t.sizes(), index, p.dtype(), p.sizes());
    }
    // A tensor buffer lives with its parameter (a checkpoint saved on the CPU resumes on a GPU).
    new_state[index][name] = spec->scalar ? t.contiguous().clone() : t.to(p.device()).contiguous().clone();
  }
  for (const auto& [index, buffers] : new_state) {
    QFLOW_CHECK(buffers.size() == specs.size(),
                "optimizer.load_state_dict: the state of parameter {} has {} of its {} buffers ({}); it needs all or "
                "none",
                index, buffers.size(), specs.size(), names);
  }
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = options[g];
  state_ = std::move(new_state);
}

template <typename Options>
void OptimizerImpl<Options>::to(Device device) {
  // Scalar buffers (step counts) stay on the CPU, where step() reads them.
  const std::vector<BufferSpec> specs = buffer_specs();
  auto is_scalar = [&](const std::string& name) {
    return std::any_of(specs.begin(), specs.end(), [&](const BufferSpec& b) { return b.scalar && name == b.name; });
  };
  for (auto& [index, buffers] : state_)
    for (auto& [name, t] : buffers)
      if (t.defined() && !is_scalar(name)) t = t.to(device);
}

template class OptimizerImpl<SGDOptions>;
template class OptimizerImpl<AdamOptions>;

}  // namespace detail
}  // namespace qflow::nn::optim
