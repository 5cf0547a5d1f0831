// qflow-fuzz-seeds OUT_DIR [TARGET...]: writes each fuzz target's seed corpus to
// OUT_DIR/<target>/ (all targets when none is named). tools/fuzz runs it before fuzzing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "seeds.h"

namespace fs = std::filesystem;
using namespace qflow::fuzz;

int main(int argc, char** argv) {
  const std::map<std::string, std::function<Seeds()>> targets = {
      {"safetensors", safetensors_seeds}, {"checkpoint", checkpoint_seeds},
      {"idx", idx_seeds},                 {"png", png_seeds},
      {"tar", tar_seeds},                 {"cifar10-batch", cifar10_batch_seeds},
      {"cifar10-archive", cifar10_archive_seeds}};
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: %s OUT_DIR [TARGET...]\ntargets:", argv[0]);
    for (const auto& [name, fn] : targets) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> wanted(argv + 2, argv + argc);
  if (wanted.empty())
    for (const auto& [name, fn] : targets) wanted.push_back(name);
  for (const std::string& name : wanted) {
    const auto it = targets.find(name);
    if (it == targets.end()) {
      std::fprintf(stderr, "qflow-fuzz-seeds: unknown target '%s'\n", name.c_str());
      return 2;
    }
    const fs::path dir = fs::path(argv[1]) / name;
    fs::create_directories(dir);
    const Seeds seeds = it->second();
    for (const auto& [file, bytes] : seeds) {
      std::ofstream out(dir / file, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "qflow-fuzz-seeds: cannot write %s\n", (dir / file).c_str());
        return 1;
      }
    }
    std::printf("%-16s %zu seeds in %s\n", name.c_str(), seeds.size(), dir.c_str());
  }
  return 0;
}
