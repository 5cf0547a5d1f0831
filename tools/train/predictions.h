#pragma once
// qflow-train --predictions FILE.csv: the model's output for every test image.
#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/tensor.h"
#include "qflow/data/data_loader.h"
#include "qflow/distributed/process_group.h"

namespace qflow::tools {

// Note [Gathered predictions]
// Under mpirun each rank evaluates its shard of the test set (Note [Sharded epochs], no
// padding), so no rank sees every image. Each rank records its rows — label, predicted class,
// softmax probabilities — at the dataset index the sampler gave it (evaluation does not
// shuffle, so the shard of the identity order names them), into a table of every image that is
// zero elsewhere; one sum all-reduce then gathers the table on every rank (adding zeros is
// exact) and rank 0 writes it. The file is the same whatever the number of processes, up to
// the float32 rounding of each process's batches.

/// Collects one evaluation's per-image outputs, in the order `loader` yields them.
class PredictionRecorder {
 public:
  PredictionRecorder(const data::DataLoader& loader, int64_t classes);
  /// One batch: its logits (B, classes) and labels (B).
  void record(const Tensor& logits, const Tensor& labels);
  /// Gathers every rank's rows (collective: every rank of `group` calls it) and, on rank 0,
  /// writes FILE.csv: "index,label,predicted,prob_0,...,prob_{C-1}", one row per test image.
  void write_csv(const std::string& path, distributed::ProcessGroup& group) const;

 private:
  std::vector<int64_t> indices_;  // dataset index of the k-th image this rank evaluates
  int64_t images_ = 0;            // in the whole test set
  int64_t classes_ = 0;
  int64_t recorded_ = 0;
  std::vector<double> rows_;  // per recorded image: label, predicted, probabilities
};

/// Refuses a --predictions path whose directory does not exist, before any work.
void check_predictions_path(const std::string& path);

}  // namespace qflow::tools
