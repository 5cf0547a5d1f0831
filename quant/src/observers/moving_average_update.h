#pragma once
// The moving-average observer's update from a batch's range, as tensor ops: shared by the CPU
// kernel of observe_moving_average_ and by the observer when its range is synchronised across
// processes first (Note [Observers stay on their device]).
#include "qflow/core/ops.h"
#include "qflow/quant/qparams.h"

namespace qflow::quant::detail {

/// Widens r symmetrically (when asked), averages it with the stored range (momentum m on the
/// stored one; the first batch seeds it) and stores it, unless `frozen`; counts the batch.
inline void moving_average_update(Range r, Tensor min_val, Tensor max_val, Tensor count, const Tensor& frozen, float m,
                                  bool symmetric) {
  Tensor lo = r.min, hi = r.max;
  if (symmetric) {
    hi = maximum(lo.abs(), hi.abs());
    lo = hi.neg();
  }
  const Tensor seen = gt(count, 0);
  lo = where(seen, min_val.mul(Scalar(m)).add(lo.mul(Scalar(1.0f - m))), lo);
  hi = where(seen, max_val.mul(Scalar(m)).add(hi.mul(Scalar(1.0f - m))), hi);
  min_val.copy_(where(frozen, min_val, lo));
  max_val.copy_(where(frozen, max_val, hi));
  count.copy_(where(frozen, count, count + 1));
}

}  // namespace qflow::quant::detail
