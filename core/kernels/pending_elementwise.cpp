// TEMPORARY (removed by the elementwise work in this session): declarations exist, kernels pending.
#include "qflow/core/ops.h"
namespace qflow {
#define PENDING QFLOW_FAIL("not implemented yet")
Tensor neg(const Tensor&) { PENDING; }
Tensor abs(const Tensor&) { PENDING; }
Tensor exp(const Tensor&) { PENDING; }
Tensor log(const Tensor&) { PENDING; }
Tensor sqrt(const Tensor&) { PENDING; }
Tensor rsqrt(const Tensor&) { PENDING; }
Tensor relu(const Tensor&) { PENDING; }
Tensor& relu_(Tensor&) { PENDING; }
Tensor sigmoid(const Tensor&) { PENDING; }
Tensor tanh(const Tensor&) { PENDING; }
Tensor sign(const Tensor&) { PENDING; }
Tensor round(const Tensor&) { PENDING; }
Tensor floor(const Tensor&) { PENDING; }
Tensor clamp(const Tensor&, std::optional<Scalar>, std::optional<Scalar>) { PENDING; }
Tensor& clamp_(Tensor&, std::optional<Scalar>, std::optional<Scalar>) { PENDING; }
Tensor pow(const Tensor&, const Tensor&) { PENDING; }
Tensor pow(const Tensor&, const Scalar&) { PENDING; }
Tensor minimum(const Tensor&, const Tensor&) { PENDING; }
Tensor maximum(const Tensor&, const Tensor&) { PENDING; }
Tensor eq(const Tensor&, const Tensor&) { PENDING; }
Tensor ne(const Tensor&, const Tensor&) { PENDING; }
Tensor lt(const Tensor&, const Tensor&) { PENDING; }
Tensor le(const Tensor&, const Tensor&) { PENDING; }
Tensor gt(const Tensor&, const Tensor&) { PENDING; }
Tensor ge(const Tensor&, const Tensor&) { PENDING; }
Tensor eq(const Tensor&, const Scalar&) { PENDING; }
Tensor ne(const Tensor&, const Scalar&) { PENDING; }
Tensor lt(const Tensor&, const Scalar&) { PENDING; }
Tensor le(const Tensor&, const Scalar&) { PENDING; }
Tensor gt(const Tensor&, const Scalar&) { PENDING; }
Tensor ge(const Tensor&, const Scalar&) { PENDING; }
Tensor where(const Tensor&, const Tensor&, const Tensor&) { PENDING; }
}  // namespace qflow
