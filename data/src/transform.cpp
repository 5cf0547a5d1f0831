// Transform base helpers and Compose.
#include "qflow/data/transform.h"

#include "qflow/core/error.h"

namespace qflow::data {

Tensor Transform::operator()(const Tensor& image, uint64_t seed, uint64_t index) const {
  SampleRng rng(seed, index);
  return apply(image, rng);
}

Compose::Compose(std::vector<TransformPtr> transforms) : transforms_(std::move(transforms)) {
  for (size_t i = 0; i < transforms_.size(); ++i) QFLOW_CHECK(transforms_[i] != nullptr, "Compose: transform {} is null", i);
}

Tensor Compose::apply(const Tensor& image, SampleRng& rng) const {
  Tensor x = image;
  for (const TransformPtr& t : transforms_) x = t->apply(x, rng);
  return x;
}

std::string Compose::repr() const {
  std::string s = "Compose(\n";
  for (const TransformPtr& t : transforms_) s += "    " + t->repr() + "\n";
  return s + ")";
}

}  // namespace qflow::data
