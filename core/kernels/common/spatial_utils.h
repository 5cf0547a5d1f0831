#pragma once
// Helpers shared by the 2-D spatial kernels (conv.cpp, conv_backward.cpp, pool.cpp):
// `int[2]` argument expansion and the unbatched (C, H, W) ↔ batched (1, C, H, W) views.
#include <string_view>
#include <utility>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/ops.h"

namespace qflow::kernels {

/// (height, width) of an `int[2]` argument given as one value (both dims) or two.
inline std::pair<int64_t, int64_t> expand_pair(const IntList& v, std::string_view arg, std::string_view op) {
  QFLOW_CHECK(v.size() == 1 || v.size() == 2, "{}: expected {} to have 1 or 2 values, got {}", op, arg, v);
  return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]};
}

/// Checks that `x` is a floating (N, C, H, W) or (C, H, W) tensor; names the op and the shape.
inline void check_spatial_input(const std::vector<int64_t>& sizes, DType dtype, std::string_view op) {
  QFLOW_CHECK(sizes.size() == 3 || sizes.size() == 4,
              "{}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got input of shape {}", op, sizes);
  QFLOW_CHECK(is_floating(dtype), "{}: expected a float32 or float64 input, got {}", op, dtype);
}

/// `x` as a contiguous (N, C, H, W) tensor: unbatched inputs get N = 1 (a view, no copy).
inline Tensor as_batched(const Tensor& x) {
  Tensor c = x.is_contiguous() ? x : contiguous(x);
  if (c.dim() == 4) return c;
  std::vector<int64_t> sizes{1, c.sizes()[0], c.sizes()[1], c.sizes()[2]};
  return make_view(c, sizes, contiguous_strides(sizes), c.storage_offset());
}

/// Drops the batch dim of a fresh (1, C, H, W) result when the op's input was unbatched.
/// The result owns its storage like any new tensor (not a view), so in-place ops may follow.
inline Tensor unbatch_like(const Tensor& y, int64_t input_dim) {
  if (input_dim == 4) return y;
  std::vector<int64_t> sizes(y.sizes().begin() + 1, y.sizes().end());
  auto strides = contiguous_strides(sizes);
  return Tensor(std::make_shared<TensorImpl>(y.impl()->storage(), std::move(sizes), std::move(strides), y.storage_offset(),
                                             y.dtype()));
}

}  // namespace qflow::kernels
