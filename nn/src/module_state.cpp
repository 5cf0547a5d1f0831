// Module state: state_dict, load_state_dict and dtype conversion.
#include <cstdint>
#include <unordered_set>
#include <utility>

#include "qflow/autograd/grad_mode.h"
#include "qflow/nn/module.h"

namespace qflow::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", k);
  return out;
}

// Note [Module::to converts in place]
// Members of a module hold Tensor handles to its parameters (`Tensor weight = register_...`),
// and optimizers hold them too. Converting by registering new tensors would leave all of those
// pointing at the old data, so like PyTorch's `param.data = param.data.to(dtype)` we swap the
// data behind the existing TensorImpl: storage, sizes, strides and dtype are replaced while the
// autograd slot (requires_grad, grad) and dispatch keys stay. The gradient is converted too.
// Module::to(Device) moves the same way (Note [Devices]).
template <typename Target>
void convert_in_place(const Tensor& t, Target target) {
  Tensor converted;
  Tensor grad = t.grad();
  {
    NoGradGuard no_grad;
    converted = t.detach().to(target);
    if (grad.defined()) grad = grad.to(target);
  }
  TensorImpl& impl = *t.impl();
  const DispatchKeySet keys = impl.keys();
  auto meta = impl.autograd_meta_ptr();
  auto extension = impl.extension_ptr();
  impl = *converted.impl();
  impl.set_autograd_meta(std::move(meta));
  impl.set_extension(std::move(extension));
  for (int k = 0; k < kMaxDispatchKeys; ++k) {
    const auto key = static_cast<DispatchKey>(k);
    if (keys.has(key)) impl.add_key(key);
    else impl.remove_key(key);
  }
  if (grad.defined()) t.set_grad(grad);
}

// Note [load_state_dict converts dtypes]
// Like PyTorch's copy_, a load converts a tensor to the dtype of the module's (float64 weights
// into float32 ones, integer counters into float), except where the conversion would change
// the values' meaning: floating point values into integers (truncated: a float deploy weight
// copied into an int8 one would become garbage) and integers into a type that does not hold
// all of them (uint8 grid values into int8 wrap around). Those are refused with both dtypes
// and shapes; widening integers (int32 into int64, bool into uint8) is exact and allowed.
bool converts_exactly(DType from, DType to) {
  if (from == to || is_floating(to)) return true;
  if (is_floating(from)) return false;
  // [min, max] of each integral type, bool included.
  const auto range = [](DType t) -> std::pair<int64_t, int64_t> {
    switch (t) {
      case DType::Bool: return {0, 1};
      case DType::UInt8: return {0, 255};
      case DType::Int8: return {-128, 127};
      case DType::Int32: return {INT32_MIN, INT32_MAX};
      default: return {INT64_MIN, INT64_MAX};
    }
  };
  const auto [from_min, from_max] = range(from);
  const auto [to_min, to_max] = range(to);
  return to_min <= from_min && from_max <= to_max;
}

}  // namespace

StateDict Module::state_dict() const {
  StateDict out;
  // No dedup: a module reachable under two paths is saved under both, as in PyTorch.
  for (const auto& [path, m] : walk(true, false)) {
    for (const Slot& s : m->parameters_) {
      if (s.value.defined()) out.insert(join(path, s.name), s.value.detach());
    }
    for (const Slot& s : m->buffers_) {
      if (s.value.defined() && s.persistent) out.insert(join(path, s.name), s.value.detach());
    }
  }
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& dict, bool strict) {
  // The live tensors (not detached views) in state_dict order.
  std::vector<NamedTensor> targets;
  for (const auto& [path, m] : walk(true, false)) {
    for (const Slot& s : m->parameters_) {
      if (s.value.defined()) targets.emplace_back(join(path, s.name), s.value);
    }
    for (const Slot& s : m->buffers_) {
      if (s.value.defined() && s.persistent) targets.emplace_back(join(path, s.name), s.value);
    }
  }
  LoadStateDictResult result;
  std::vector<std::string> mismatches;
  std::unordered_set<std::string> target_keys;
  for (const auto& [key, target] : targets) {
    target_keys.insert(key);
    const Tensor* source = dict.find(key);
    if (source == nullptr) {
      result.missing_keys.push_back(key);
    } else if (!source->defined()) {
      mismatches.push_back(fmt::format("undefined tensor for {}", key));
    } else if (source->sizes() != target.sizes()) {
      mismatches.push_back(fmt::format(
          "size mismatch for {}: copying a tensor of shape {} from the state_dict, the shape in the module is {}", key,
          source->sizes(), target.sizes()));
    } else if (!converts_exactly(source->dtype(), target.dtype())) {
      mismatches.push_back(fmt::format("dtype mismatch for {}: copying a {} tensor of shape {} from the state_dict into "
                                       "the module's {} tensor of shape {} would change its values",
                                       key, source->dtype(), source->sizes(), target.dtype(), target.sizes()));
    }
  }
  for (const auto& [key, value] : dict) {
    if (!target_keys.count(key)) result.unexpected_keys.push_back(key);
  }
  const bool key_errors = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_errors || !mismatches.empty()) {
    std::string msg = fmt::format("load_state_dict: error(s) in loading state_dict for {}:", type_name());
    if (strict && !result.missing_keys.empty()) msg += "\n  Missing key(s): " + quoted_list(result.missing_keys);
    if (strict && !result.unexpected_keys.empty()) {
      msg += "\n  Unexpected key(s): " + quoted_list(result.unexpected_keys);
    }
    for (const auto& m : mismatches) msg += "\n  " + m;
    QFLOW_FAIL("{}", msg);
  }
  NoGradGuard no_grad;  // a load is not part of any graph, and parameters are leaves
  for (auto& [key, target] : targets) {
    if (const Tensor* source = dict.find(key)) target.copy_(*source);
  }
  return result;
}

Module& Module::to(DType dtype) {
  QFLOW_CHECK(is_floating(dtype), "Module::to: only floating point dtypes are accepted, got {}", dtype);
  std::unordered_set<const TensorImpl*> done;
  for (const auto& [path, m] : walk(true, true)) {
    for (const auto* slots : {&m->parameters_, &m->buffers_}) {
      for (const Slot& s : *slots) {
        // Integer buffers (counters, indices) keep their dtype, as in PyTorch.
        if (!s.value.defined() || !s.value.is_floating_point() || s.value.dtype() == dtype) continue;
        if (done.insert(s.value.impl()).second) convert_in_place(s.value, dtype);
      }
    }
  }
  return *this;
}

Module& Module::to(Device device) {
  std::unordered_set<const TensorImpl*> done;
  for (const auto& [path, m] : walk(true, true)) {
    for (const auto* slots : {&m->parameters_, &m->buffers_}) {
      for (const Slot& s : *slots) {
        if (!s.value.defined() || s.value.device() == device) continue;
        if (done.insert(s.value.impl()).second) convert_in_place(s.value, device);
      }
    }
  }
  return *this;
}

Device Module::device() const {
  for (const auto& [path, m] : walk(true, true))
    for (const auto* slots : {&m->parameters_, &m->buffers_})
      for (const Slot& s : *slots)
        if (s.value.defined()) return s.value.device();
  return Device::cpu();
}

}  // namespace qflow::nn
