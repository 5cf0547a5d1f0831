#pragma once
// Quantization observers that agree across data-parallel ranks.
//
// Note [Synchronised observers]
// In QAT each rank sees a different share of the batch, so left alone each rank's observers
// would record a different activation range, fake-quantize with a different scale, and the
// replicas would train different models (and deploy differently depending on which rank
// builds the deploy model). With synchronised observers every observer allreduces the range
// it just measured — the minimum of the mins and the maximum of the maxes, exactly the range
// of the whole global batch — before recording it. One allreduce per observer per forward
// (−min and max packed into one MAX reduction); weight observers take part too, at no effect
// on their values (the weights are identical), so the rule has no exceptions.
#include <cstdint>

#include "qflow/distributed/process_group.h"
#include "qflow/nn/module.h"

namespace qflow::distributed {

/// Installs the range allreduce on every quant::Observer in `root`'s tree, on a duplicate of
/// `group` shared by them; returns how many observers there were. A world of one installs
/// nothing.
int64_t synchronize_observers(nn::Module& root, const ProcessGroup& group = ProcessGroup::world());

}  // namespace qflow::distributed
