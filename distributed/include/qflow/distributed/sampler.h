#pragma once
// data::DistributedSampler for this process of the job (Note [Sharded epochs]).
#include "qflow/data/distributed_sampler.h"
#include "qflow/distributed/process_group.h"

namespace qflow::distributed {

/// This rank's share: padded to equal shards for training, exact (pad = false) for evaluation.
inline data::DistributedSampler sampler_for(const ProcessGroup& group, bool pad = true) {
  return {.num_replicas = group.size(), .rank = group.rank(), .pad = pad};
}

}  // namespace qflow::distributed
