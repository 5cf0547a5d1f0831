// Collectives timed on their own, outside training: what one allreduce costs when nothing
// else runs, the yardstick for how much of it the training step hid.
#pragma once
#include <cstdint>
#include <vector>

#include "qflow/distributed/process_group.h"

namespace qflow::bench {

/// Seconds of one blocking allreduce (sum) of `bytes` of float32, `repetitions` times, each
/// started together (after a barrier) so a late rank's arrival is not counted.
std::vector<double> time_all_reduce(distributed::ProcessGroup& world, double bytes, int repetitions);

/// Seconds per allreduce of one float32 (4 bytes): `batches` times the mean over a run of
/// `per_batch` back-to-back allreduces (one allreduce is too short for the clock and the
/// barrier's skew between ranks).
std::vector<double> time_small_all_reduce(distributed::ProcessGroup& world, int batches, int per_batch);

}  // namespace qflow::bench
