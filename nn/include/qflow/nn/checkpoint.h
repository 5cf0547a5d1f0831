#pragma once
// Training checkpoints: everything a run needs to continue bit-identically, in ONE
// safetensors file (see serialize.h and Note [Training checkpoints]).
//
//   nn::save_training_checkpoint("run/ckpt.safetensors", *net, opt, &sched, {.epoch = e, .step = s});
//   ...
//   nn::TrainingProgress p = nn::load_training_checkpoint("run/ckpt.safetensors", *net, opt, &sched);
//
// Note [Training checkpoints]
// The file holds, under prefixed keys,
//   model.<state_dict key>         parameters and persistent buffers (BN running stats, ...)
//   optimizer.<key>                optimizer state (see Note [Optimizer state])
//   scheduler.<key>                the LR schedule's step and base lrs (when a scheduler is given)
//   progress.epoch, progress.step  int64 scalars
//   rng.seed, rng.offset           the default generator's Philox state (uint64 stored as int64 bits)
// and "__metadata__" {"format": "qflow.training_checkpoint", "format_version": "1"}. The RNG
// state matters as soon as training draws random numbers (Dropout, data augmentation): without
// it a resumed run would drop different units than the uninterrupted one.
// Loading is all-or-nothing: the file is fully validated (nn::load), then the optimizer,
// scheduler and model are restored; if any of them refuses its part (wrong architecture,
// missing keys), the ones already restored are rolled back and nothing has changed, including
// the RNG. Saving goes through nn::save, so it is atomic.
#include <cstdint>
#include <string>

#include "qflow/nn/module.h"
#include "qflow/nn/optim/lr_scheduler.h"
#include "qflow/nn/optim/optimizer.h"
#include "qflow/nn/serialize.h"

namespace qflow::nn {

/// Where training stood when the checkpoint was written (the caller's counters).
struct TrainingProgress {
  int64_t epoch = 0;
  int64_t step = 0;
  bool operator==(const TrainingProgress&) const = default;
};

/// Writes model, optimizer, scheduler (may be null), progress and the default generator's
/// state to `path` atomically. `metadata` adds free-form strings (e.g. the command line);
/// the keys "format" and "format_version" are reserved.
void save_training_checkpoint(const std::string& path, const Module& model, const optim::Optimizer& optimizer,
                              const optim::LRScheduler* scheduler, TrainingProgress progress,
                              const CheckpointMetadata& metadata = {});

/// Restores everything save_training_checkpoint wrote (the model strictly) and returns the
/// progress. `scheduler` must be given exactly when the checkpoint holds one. Throws a
/// qflow::Error naming the file and the problem, leaving model, optimizer, scheduler and RNG
/// untouched. `metadata`, when given, receives the file's metadata.
TrainingProgress load_training_checkpoint(const std::string& path, Module& model, optim::Optimizer& optimizer,
                                          optim::LRScheduler* scheduler, CheckpointMetadata* metadata = nullptr);

}  // namespace qflow::nn
