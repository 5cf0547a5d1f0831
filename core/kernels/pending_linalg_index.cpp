// TEMPORARY (removed by the linalg and index work in this session).
#include "qflow/core/ops.h"
namespace qflow {
#define PENDING QFLOW_FAIL("not implemented yet")
Tensor mm(const Tensor&, const Tensor&) { PENDING; }
Tensor bmm(const Tensor&, const Tensor&) { PENDING; }
Tensor matmul(const Tensor&, const Tensor&) { PENDING; }
Tensor addmm(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&) { PENDING; }
}  // namespace qflow
