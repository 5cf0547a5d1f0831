#include "progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace qflow::tools {

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), tty_(isatty(fileno(stdout)) != 0),
      start_(std::chrono::steady_clock::now()) {}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ProgressBar::rate() const {
  const double s = elapsed_seconds();
  return s > 0 ? static_cast<double>(units_) / s : 0.0;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

void ProgressBar::resume_at(int64_t steps) {
  done_ = resumed_ = steps;
  last_decile_ = total_ > 0 ? static_cast<int>(10 * steps / total_) : -1;  // no lines for earlier deciles
  start_ = std::chrono::steady_clock::now();
}

void ProgressBar::update(int64_t steps, int64_t units, const std::string& fields) {
  done_ += steps;
  units_ += units;
  draw(fields, false);
}

void ProgressBar::finish(const std::string& fields) { draw(fields, true); }

void ProgressBar::draw(const std::string& fields, bool final) {
  const double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const int64_t run = done_ - resumed_;  // steps of this run, the only ones timed
  const double eta = run > 0 ? elapsed_seconds() * static_cast<double>(total_ - done_) / static_cast<double>(run) : 0.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  const std::string line = fmt::format("{} {:>5}/{} [{}] {} {:.0f} {}/s {} {}", label_, done_, total_, bar, fields, rate(), unit_,
                                       final ? "took" : "ETA", format_duration(final ? elapsed_seconds() : eta));
  if (tty_) {
    fmt::print("\r\033[K{}{}", line, final ? "\n" : "");
    std::fflush(stdout);
    return;
  }
  const int decile = static_cast<int>(frac * 10);
  if (final || decile > last_decile_) {
    last_decile_ = decile;
    if (!final || decile < 10 || done_ == total_) fmt::print("{}\n", line);
    std::fflush(stdout);
  }
}

}  // namespace qflow::tools
