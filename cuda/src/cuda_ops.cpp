#include "cuda_ops.h"

#include <algorithm>
#include <numeric>

namespace qflow::cuda {

bool is_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  // Sort the dims by stride; dense when each stride is the product of the sizes inside it.
  const auto& sizes = t.sizes();
  const auto& strides = t.strides();
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

Tensor empty_like_layout(const Tensor& t, DType dtype) {
  if (t.is_contiguous() || !is_dense(t)) return empty(t.sizes(), dtype, t.device());
  const int64_t n = t.numel();
  auto storage = Storage::allocate(static_cast<size_t>(n) * element_size(dtype), t.device());
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), t.sizes(), t.strides(), 0, dtype));
}

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& s) {
  QFLOW_ASSERT(s.size() == 4, "channels-last needs 4 dims, got {}", s);
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

Tensor empty_channels_last(const std::vector<int64_t>& sizes, DType dtype, Device device) {
  const int64_t n = checked_numel(sizes, "empty_channels_last");
  auto storage = Storage::allocate(static_cast<size_t>(n) * element_size(dtype), device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, channels_last_strides(sizes), 0, dtype));
}

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const auto want = channels_last_strides(t.sizes());
  for (int d = 0; d < 4; ++d)
    if (t.sizes()[d] != 1 && t.strides()[d] != want[d]) return false;
  return true;
}

}  // namespace qflow::cuda
