// TEMPORARY (removed by the reduce work in this session): declarations exist, kernels pending.
#include "qflow/core/ops.h"
namespace qflow {
#define PENDING QFLOW_FAIL("not implemented yet")
Tensor sum(const Tensor&, const IntList&, bool) { PENDING; }
Tensor mean(const Tensor&, const IntList&, bool) { PENDING; }
Tensor var(const Tensor&, const IntList&, bool, bool) { PENDING; }
Tensor std(const Tensor&, const IntList&, bool, bool) { PENDING; }
Tensor max(const Tensor&) { PENDING; }
Tensor min(const Tensor&) { PENDING; }
std::tuple<Tensor, Tensor> max(const Tensor&, int64_t, bool) { PENDING; }
std::tuple<Tensor, Tensor> min(const Tensor&, int64_t, bool) { PENDING; }
Tensor argmax(const Tensor&, std::optional<int64_t>, bool) { PENDING; }
Tensor argmin(const Tensor&, std::optional<int64_t>, bool) { PENDING; }
Tensor amax(const Tensor&, const IntList&, bool) { PENDING; }
Tensor amin(const Tensor&, const IntList&, bool) { PENDING; }
Tensor logsumexp(const Tensor&, const IntList&, bool) { PENDING; }
Tensor sum_to(const Tensor&, const IntList&) { PENDING; }
}  // namespace qflow
