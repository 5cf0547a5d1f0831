#pragma once
// The per-epoch record of a run: kept in log.csv and log.jsonl (so a resumed run extends
// the same files) and drawn into curves.png. Every file is replaced whole through a temporary
// and rename, so a run killed at any moment leaves complete files.
#include <string>
#include <vector>

namespace qflow::tools {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0, lr = 0, images_per_s = 0, seconds = 0;
};

/// Writes `text` to `path` through a hidden temporary beside it and a rename: a run killed while
/// writing leaves the previous file whole.
void replace_file(const std::string& path, const std::string& text);

class RunLog {
 public:
  /// Opens (or, with `resume`, continues) the logs in `dir`, keeping records up to `epochs_done`.
  RunLog(std::string dir, bool resume, int64_t epochs_done);
  void append(const EpochRecord& r);
  const std::vector<EpochRecord>& records() const { return records_; }
  /// Rewrites curves.png from all records.
  void plot() const;

 private:
  void write() const;  // log.csv and log.jsonl from records_

  std::string dir_;
  std::vector<EpochRecord> records_;
};

}  // namespace qflow::tools
