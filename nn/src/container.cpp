#include "qflow/nn/container.h"

#include <typeinfo>

#include "qflow/nn/cloneable.h"

namespace qflow::nn {

namespace {
// A subclass may add members a registry copy would not rebuild: refuse rather than slice.
constexpr const char* kSubclassClone = "it derives from a container; give it its own clone()";
}  // namespace

const ModulePtr& ModuleSequence::operator[](int64_t index) const {
  const auto n = static_cast<int64_t>(size());
  QFLOW_CHECK(index >= -n && index < n, "{}: index {} is out of range for {} modules", type_name(), index, n);
  return registered_children()[static_cast<size_t>(index < 0 ? index + n : index)].second;
}

Tensor Sequential::forward(const Tensor& input) {
  const TensorList out = forward_list({input});
  QFLOW_CHECK(out.size() == 1, "Sequential: the last module returned {} outputs, expected 1", out.size());
  return out[0];
}

TensorList Sequential::forward_list(const TensorList& inputs) {
  TensorList values = inputs;
  // Through call(), so each child is a module boundary fx can see.
  for (const auto& [name, child] : registered_children()) values = child->call(values);
  return values;
}

// Containers hold their entries only in the registries, so a registry copy is a full clone.
ModulePtr Sequential::clone() const {
  if (typeid(*this) != typeid(Sequential)) detail::fail_clone(*this, kSubclassClone);
  auto copy = std::make_shared<Sequential>();
  clone_entries_into(*copy);
  return copy;
}

ModulePtr ModuleList::clone() const {
  if (typeid(*this) != typeid(ModuleList)) detail::fail_clone(*this, kSubclassClone);
  auto copy = std::make_shared<ModuleList>();
  clone_entries_into(*copy);
  return copy;
}

}  // namespace qflow::nn
