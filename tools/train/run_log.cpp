#include "run_log.h"

#include <fmt/format.h>
#include <fmt/os.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "viz/curve_plot.h"
#include "qflow/core/error.h"

namespace qflow::tools {

using viz::Panel;
using viz::Series;

namespace {
constexpr const char* kHeader = "epoch,train_loss,train_acc,test_loss,test_acc,lr,images_per_s,seconds";
constexpr const char* kStepsHeader = "step,epoch,train_loss,train_acc";

std::vector<StepRecord> read_steps(const std::string& path, int64_t keep) {
  std::vector<StepRecord> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    StepRecord r;
    char comma;
    std::istringstream s(line);
    if (s >> r.step >> comma >> r.epoch >> comma >> r.train_loss >> comma >> r.train_acc && r.step <= keep) out.push_back(r);
  }
  return out;
}

std::vector<EpochRecord> read_csv(const std::string& path, int64_t keep) {
  std::vector<EpochRecord> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    EpochRecord r;
    char comma;
    std::istringstream s(line);
    if (s >> r.epoch >> comma >> r.train_loss >> comma >> r.train_acc >> comma >> r.test_loss >> comma >> r.test_acc >> comma >>
        r.lr >> comma >> r.images_per_s >> comma >> r.seconds) {
      if (r.epoch <= keep) out.push_back(r);
    }
  }
  return out;
}

nlohmann::json to_json(const EpochRecord& r) {
  return {{"epoch", r.epoch}, {"train_loss", r.train_loss}, {"train_acc", r.train_acc}, {"test_loss", r.test_loss},
          {"test_acc", r.test_acc}, {"lr", r.lr}, {"images_per_s", r.images_per_s}, {"seconds", r.seconds}};
}

// A hidden temporary next to `path`, renamed over it once complete: a run killed while
// writing leaves the previous file whole (one qflow-train per directory, so the name is fixed).
std::string temporary_for(const std::string& path) {
  const std::filesystem::path p(path);
  // fmt rather than operator+: GCC 12 warns falsely (-Wrestrict) about the concatenation.
  return (p.parent_path() / fmt::format(".{}.tmp", p.filename().string())).string();
}

std::string to_csv(const EpochRecord& r) {
  return fmt::format("{},{:.6f},{:.4f},{:.6f},{:.4f},{:.8g},{:.1f},{:.2f}", r.epoch, r.train_loss, r.train_acc, r.test_loss,
                     r.test_acc, r.lr, r.images_per_s, r.seconds);
}
}  // namespace

void replace_file(const std::string& path, const std::string& text) {
  const std::string temp = temporary_for(path);
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    QFLOW_CHECK(out.flush().good(), "qflow-train: writing '{}' failed", temp);
  }
  std::filesystem::rename(temp, path);
}

RunLog::RunLog(std::string dir, bool resume, int64_t epochs_done, int64_t steps_done) : dir_(std::move(dir)) {
  std::filesystem::create_directories(dir_);
  if (resume) {
    records_ = read_csv(dir_ + "/log.csv", epochs_done);
    steps_ = read_steps(dir_ + "/steps.csv", steps_done);
  }
  std::filesystem::remove(temporary_for(dir_ + "/curves.png"));  // left by a run killed while plotting
  // Rewrite both files from the kept records: epochs after the checkpoint are dropped, so
  // the logs always describe the run the weights came from.
  write();
  write_steps();
}

void RunLog::append(const EpochRecord& r) {
  records_.push_back(r);
  write();
}

void RunLog::write() const {
  std::string csv = std::string(kHeader) + "\n", jsonl;
  for (const auto& r : records_) {
    csv += to_csv(r) + "\n";
    jsonl += to_json(r).dump() + "\n";
  }
  replace_file(dir_ + "/log.csv", csv);
  replace_file(dir_ + "/log.jsonl", jsonl);
}

void RunLog::write_steps() const {
  std::string csv = std::string(kStepsHeader) + "\n";
  for (const auto& r : steps_) csv += fmt::format("{},{},{:.6f},{:.4f}\n", r.step, r.epoch, r.train_loss, r.train_acc);
  replace_file(dir_ + "/steps.csv", csv);
}

void RunLog::plot(int64_t steps_per_epoch) const {
  const unsigned char blue[3] = {31, 119, 180}, orange[3] = {230, 110, 0};
  auto series = [](const char* name, const unsigned char rgb[3], bool markers) {
    return Series{.name = name, .x = {}, .y = {}, .rgb = {rgb[0], rgb[1], rgb[2]}, .markers = markers};
  };
  Panel loss{"loss", {series("train batch loss", blue, false), series("test loss", orange, true)}};
  Panel acc{"accuracy %", {series("train batch acc", blue, false), series("test acc", orange, true)}};
  for (const auto& r : steps_) {
    loss.series[0].x.push_back(static_cast<double>(r.step));
    loss.series[0].y.push_back(r.train_loss);
    acc.series[0].x.push_back(static_cast<double>(r.step));
    acc.series[0].y.push_back(r.train_acc);
  }
  for (const auto& r : records_) {
    const double end = static_cast<double>(r.epoch * steps_per_epoch);
    loss.series[1].x.push_back(end);
    loss.series[1].y.push_back(r.test_loss);
    acc.series[1].x.push_back(end);
    acc.series[1].y.push_back(r.test_acc);
  }
  const std::string png = dir_ + "/curves.png";
  viz::write_curves_png(temporary_for(png), {loss, acc}, "optimizer step");
  std::filesystem::rename(temporary_for(png), png);
}

}  // namespace qflow::tools
