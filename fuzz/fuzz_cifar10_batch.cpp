// libFuzzer target: CIFAR-10 binary records (a batch file) -> data::CIFAR10 reading a
// directory of batch files. The input is every batch file of the directory at once (the test
// split reads test_batch.bin, the train split data_batch_1..5.bin: all links to one memfd).
// See Note [Fuzzing the readers].
#include <unistd.h>

#include <filesystem>

#include "fuzz_util.h"
#include "qflow/data/cifar10.h"

using namespace qflow;
namespace fs = std::filesystem;

namespace {

// A directory of symlinks to the memfd, removed when the fuzzer exits.
struct BatchDir {
  fuzz::MemFile file{"cifar10-batch"};
  fs::path dir = fs::temp_directory_path() / ("qflow-fuzz-cifar10-" + std::to_string(::getpid()));
  BatchDir() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* name : {"test_batch.bin", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                             "data_batch_4.bin", "data_batch_5.bin"})
      fs::create_symlink(file.path(), dir / name);
  }
  ~BatchDir() { fs::remove_all(dir); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static BatchDir batches;
  batches.file.write(data, size);
  for (bool train : {false, true}) {
    fuzz::accepts([&] {
      const data::CIFAR10 ds(batches.dir.string(), train);
      const int64_t records = static_cast<int64_t>(size) / data::CIFAR10::kRecordBytes;
      fuzz::require(ds.size() == (train ? 5 : 1) * records, "one sample per record of every batch file");
      for (int64_t i = 0; i < ds.size(); ++i) {
        const data::Example e = ds.get(i);
        const uint8_t* record = data + (i % records) * data::CIFAR10::kRecordBytes;
        fuzz::require(e.label == record[0] && e.image.data_ptr<uint8_t>()[0] == record[1] &&
                          e.image.data_ptr<uint8_t>()[3071] == record[3072],
                      "a sample is its record's label and pixels");
      }
    });
  }
  return 0;
}
