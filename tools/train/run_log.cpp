#include "run_log.h"

#include <fmt/format.h>
#include <fmt/os.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/curve_plot.h"
#include "qflow/core/error.h"

namespace qflow::tools {

namespace {
constexpr const char* kHeader = "epoch,train_loss,train_acc,test_loss,test_acc,lr,images_per_s,seconds";

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

RunLog::RunLog(std::string dir, bool resume, int64_t epochs_done) : dir_(std::move(dir)) {
  std::filesystem::create_directories(dir_);
  if (resume) records_ = read_csv(dir_ + "/log.csv", epochs_done);
  std::filesystem::remove(temporary_for(dir_ + "/curves.png"));  // left by a run killed while plotting
  // Rewrite both files from the kept records: epochs after the checkpoint are dropped, so
  // the logs always describe the run the weights came from.
  write();
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

void RunLog::plot() const {
  Series train_loss{"train loss", {}, {31, 119, 180}}, test_loss{"test loss", {}, {255, 127, 14}};
  Series train_acc{"train acc", {}, {31, 119, 180}}, test_acc{"test acc", {}, {255, 127, 14}};
  for (const auto& r : records_) {
    train_loss.values.push_back(r.train_loss);
    test_loss.values.push_back(r.test_loss);
    train_acc.values.push_back(r.train_acc);
    test_acc.values.push_back(r.test_acc);
  }
  const std::string png = dir_ + "/curves.png";
  write_curves_png(temporary_for(png), {{train_loss, test_loss}, {train_acc, test_acc}});
  std::filesystem::rename(temporary_for(png), png);
}

}  // namespace qflow::tools
