#include "run_log.h"

#include <fmt/format.h>
#include <fmt/os.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/curve_plot.h"

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

std::string to_csv(const EpochRecord& r) {
  return fmt::format("{},{:.6f},{:.4f},{:.6f},{:.4f},{:.8g},{:.1f},{:.2f}", r.epoch, r.train_loss, r.train_acc, r.test_loss,
                     r.test_acc, r.lr, r.images_per_s, r.seconds);
}
}  // namespace

RunLog::RunLog(std::string dir, bool resume, int64_t epochs_done) : dir_(std::move(dir)) {
  std::filesystem::create_directories(dir_);
  if (resume) records_ = read_csv(dir_ + "/log.csv", epochs_done);
  // Rewrite both files from the kept records: epochs after the checkpoint are dropped, so
  // the logs always describe the run the weights came from.
  std::ofstream csv(dir_ + "/log.csv", std::ios::trunc);
  std::ofstream jsonl(dir_ + "/log.jsonl", std::ios::trunc);
  csv << kHeader << "\n";
  for (const auto& r : records_) {
    csv << to_csv(r) << "\n";
    jsonl << to_json(r).dump() << "\n";
  }
}

void RunLog::append(const EpochRecord& r) {
  records_.push_back(r);
  std::ofstream(dir_ + "/log.csv", std::ios::app) << to_csv(r) << "\n";
  std::ofstream(dir_ + "/log.jsonl", std::ios::app) << to_json(r).dump() << "\n";
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
  write_curves_png(dir_ + "/curves.png", {{train_loss, test_loss}, {train_acc, test_acc}});
}

}  // namespace qflow::tools
