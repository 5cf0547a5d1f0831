#pragma once
// A progress line for long loops: count, bar, rate and ETA, plus free-form fields
// ("loss 0.512 acc 83.1%"). On a terminal it redraws one line; otherwise (logs, CI) it
// prints a plain line at every 10 % so files stay readable.
#include <chrono>
#include <cstdint>
#include <string>

namespace qflow::tools {

class ProgressBar {
 public:
  /// `label` starts the line ("epoch 3/30"); `total` steps; `unit` names what the rate counts.
  ProgressBar(std::string label, int64_t total, std::string unit = "img");
  /// A resumed loop: `steps` were done by an earlier run. They fill the bar but not the rate,
  /// and the ETA extrapolates only from the steps run since.
  void resume_at(int64_t steps);
  /// Advances by `steps` (e.g. one batch) worth `units` (e.g. its images).
  void update(int64_t steps, int64_t units, const std::string& fields);
  /// Prints the final state and a newline.
  void finish(const std::string& fields);
  double elapsed_seconds() const;
  double rate() const;

 private:
  void draw(const std::string& fields, bool final);

  std::string label_, unit_;
  int64_t total_, done_ = 0, resumed_ = 0, units_ = 0;
  int last_decile_ = -1;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

/// "1:02:03" or "2:03".
std::string format_duration(double seconds);

}  // namespace qflow::tools
