// qflow-fuzz-replay-<target> PATH...: the regression-replay form of a fuzz target (OSS-Fuzz's
// standalone driver). Feeds every file named, and every file under every folder named (sorted,
// recursively), to the target's LLVMFuzzerTestOneInput once, in an ordinary build without
// libFuzzer, so ctest runs each target over its seed corpus and past findings and a target
// that no longer builds or crashes on a known input fails CI. tools/fuzz fuzzes for real.
//
// Exits 0 when every input ran (a qflow::Error is the target's correct answer to a bad file and
// is caught inside the target, Note [Fuzzing the readers]), 1 when no input was found (an empty
// corpus would prove nothing), 2 on a path that cannot be read; a crash or a violated property
// aborts as it does under libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

// The files `path` names: itself, or the regular files under it in sorted order.
std::vector<fs::path> inputs_of(const fs::path& path) {
  if (!fs::is_directory(path)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\nRuns the fuzz target once on every input file.\n", argv[0]);
    return argc < 2 ? 2 : 0;
  }
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    if (!fs::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such file or folder: %s\n", argv[0], argv[i]);
      return 2;
    }
    for (const fs::path& file : inputs_of(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], file.c_str());
        return 2;
      }
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
      static const uint8_t kNone = 0;  // libFuzzer never passes a null pointer, even for no bytes
      LLVMFuzzerTestOneInput(bytes.empty() ? &kNone : bytes.data(), bytes.size());
      ++replayed;
    }
  }
  std::printf("%zu inputs replayed without a finding\n", replayed);
  if (replayed == 0) {
    std::fprintf(stderr, "%s: no input files: an empty corpus proves nothing\n", argv[0]);
    return 1;
  }
  return 0;
}
