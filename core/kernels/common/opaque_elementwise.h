#pragma once
// Element-wise kernels on float32 tensors in an opaque layout (see Note [Opaque layouts]):
// they run over the raw storage, padding included, so f must map zeros to zero (relu, add,
// the ReLU gradient) for the padding to stay zero.
#include "kernels/common/kernel_utils.h"
#include "qflow/core/opaque_tensor.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow::kernels {

/// Elements of storage an opaque float32 tensor spans (padding included).
inline int64_t opaque_elements(const Tensor& t) {
  return static_cast<int64_t>(t.impl()->opaque_layout()->nbytes() / sizeof(float));
}

inline float* opaque_data(const Tensor& t) { return static_cast<float*>(t.impl()->data()); }

/// True when `a` and `b` are float32 tensors of the same sizes in the same opaque layout.
inline bool same_opaque_layout(const Tensor& a, const Tensor& b) {
  const OpaqueLayout* la = a.impl()->opaque_layout();
  const OpaqueLayout* lb = b.impl()->opaque_layout();
  return la && lb && la->same_as(*lb) && a.sizes() == b.sizes() && a.dtype() == DType::Float32 &&
         b.dtype() == DType::Float32;
}

/// `t` (float32, `like`'s sizes) in `like`'s opaque layout: itself when it already is, else
/// made plain and converted (a plain gradient or operand joining blocked activations).
inline Tensor joined_to_layout_of(Tensor t, const Tensor& like) {
  if (same_opaque_layout(t, like)) return t;
  t.impl()->make_plain();
  return to_opaque_layout_of(t, like);
}

/// out[i] = f(x[i]) over the storage; out may be x (in place).
template <typename F>
void opaque_unary_into(const Tensor& out, const Tensor& x, const F& f) {
  const float* px = opaque_data(x);
  float* po = opaque_data(out);
  parallel_for(opaque_elements(x), kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) po[i] = f(px[i]);
  });
}

/// out[i] = f(a[i], b[i]) over the storage of three tensors in one layout; out may alias a.
template <typename F>
void opaque_binary_into(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  const float *pa = opaque_data(a), *pb = opaque_data(b);
  float* po = opaque_data(out);
  parallel_for(opaque_elements(a), kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i], pb[i]);
  });
}

}  // namespace qflow::kernels
