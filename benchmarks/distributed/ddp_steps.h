// The training steps qflow-bench-ddp times, and what it records of each.
#pragma once
#include <cstdint>
#include <vector>

#include "qflow/distributed/process_group.h"

namespace qflow::bench {

struct StepSettings {
  int64_t batch = 32;       // per process
  int steps = 20;           // timed
  int warmup = 3;           // untimed first (allocator, OpenBLAS buffers, MPI connections)
  double bucket_mb = 25;    // DataParallelOptions::bucket_cap_mb
  bool fuse = true;         // traced and fx::fuse_activations, as qflow-train steps the model
};

/// Per timed step, in seconds (this rank's clock).
struct StepTimings {
  std::vector<double> step;       // broadcast of buffers + forward + loss + backward + SGD step
  std::vector<double> broadcast;  // DistributedDataParallel::broadcast_buffers at the step's start
  std::vector<double> backward;   // loss.backward() until the last gradient arrived (its compute)
  std::vector<double> exposed;    // waited for gradient communication (DataParallelStats)
  // From the moment the first bucket was complete (and launched) to the last gradient's
  // arrival: the stretch of backward its communication can hide behind. Empty for a world of one.
  std::vector<double> window;
  // Per parameter (registration order): its bytes, and per timed step how long before the last
  // gradient its own arrived — what benchmarks/distributed/scaling needs to replay the buckets
  // of any bucket size on any network.
  std::vector<double> param_bytes;
  std::vector<std::vector<double>> before_end;
  // CPU time of this process over the timed steps / (wall time × threads): below 1 when other
  // programs took the cores (this machine is shared), so a run's figures can be judged.
  double cpu_share = 0;
  double grad_bytes = 0;  // float32 gradients of the trainable parameters
  int64_t buckets = 0;    // DataParallelStats::buckets (0 for a world of one)
  int64_t buffers = 0;    // buffers broadcast per step (BatchNorm running statistics, counters)
};

/// ResNet18 for 3x32x32 images and 10 classes under DistributedDataParallel on `world`:
/// SGD (momentum 0.9, weight decay 5e-4) on cross_entropy over one random batch per rank,
/// drawn once. The same on every rank of the job (they must call it together).
StepTimings run_ddp_steps(const StepSettings& settings, distributed::ProcessGroup& world);

}  // namespace qflow::bench
