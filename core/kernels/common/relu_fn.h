#pragma once
// The one definition of ReLU's element function, shared by relu/relu_ and the fused kernels
// that end in a ReLU (batch_norm_relu, add_relu), so a fused result equals the unfused one bit
// for bit.

namespace qflow::kernels {

/// `x < 0 ? 0 : x` rather than max(x, 0) so that NaN propagates; compiles to a SIMD max.
template <typename T>
inline T relu_fn(T x) {
  return x < T(0) ? T(0) : x;
}

}  // namespace qflow::kernels
