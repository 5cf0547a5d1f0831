#pragma once
// The record of a run: per epoch in log.csv and log.jsonl, per optimizer step in steps.csv (so
// a resumed run extends the same files), both drawn into curves.png. Every file is replaced
// whole through a temporary and rename, so a run killed at any moment leaves complete files.
#include <string>
#include <vector>

namespace qflow::tools {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0, lr = 0, images_per_s = 0, seconds = 0;
};

/// One optimizer step: the loss and accuracy of its (global) batch.
struct StepRecord {
  int64_t step = 0;   // 1-based, over the whole run
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0;
};

/// Writes `text` to `path` through a hidden temporary beside it and a rename: a run killed while
/// writing leaves the previous file whole.
void replace_file(const std::string& path, const std::string& text);

class RunLog {
 public:
  /// Opens (or, with `resume`, continues) the logs in `dir`, keeping the records up to
  /// `epochs_done` epochs and `steps_done` steps.
  RunLog(std::string dir, bool resume, int64_t epochs_done, int64_t steps_done);
  void append(const EpochRecord& r);
  /// Kept in memory until write_steps(): one file write per step would cost more than the step.
  void append_step(const StepRecord& r) { steps_.push_back(r); }
  /// Rewrites steps.csv; the trainer calls it whenever it saves last.safetensors, so the steps
  /// on file are the ones the checkpoint has trained.
  void write_steps() const;
  const std::vector<EpochRecord>& records() const { return records_; }
  const std::vector<StepRecord>& steps() const { return steps_; }
  /// Rewrites curves.png from all records: loss and accuracy over optimizer steps, the training
  /// batches' per step and the test set's at the end of each epoch of `steps_per_epoch` steps.
  void plot(int64_t steps_per_epoch) const;

 private:
  void write() const;  // log.csv and log.jsonl from records_

  std::string dir_;
  std::vector<EpochRecord> records_;
  std::vector<StepRecord> steps_;
};

}  // namespace qflow::tools
