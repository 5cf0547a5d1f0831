// libFuzzer target: a CIFAR-10 archive (cifar-10-binary.tar.gz or plain .tar) -> data::CIFAR10
// reading it without unpacking, test and train splits. See Note [Fuzzing the readers] and
// tar_fixup.h.
#include "fuzz_util.h"
#include "qflow/data/cifar10.h"
#include "tar_fixup.h"

using namespace qflow;

namespace {

void check(const data::CIFAR10& ds) {
  fuzz::require(ds.size() > 0 && ds.class_names().size() == 10, "a loaded split has samples and ten classes");
  for (int64_t i = 0; i < ds.size(); ++i) {
    const data::Example e = ds.get(i);
    fuzz::require(e.label >= 0 && e.label < 10 && e.image.sizes() == std::vector<int64_t>{3, 32, 32},
                  "every sample is a (3, 32, 32) image with a label in [0, 10)");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file("cifar-10-binary.tar.gz");
  std::vector<uint8_t> bytes(data, data + size);
  if (!fuzz::is_gzip(data, size)) fuzz::fix_tar_checksums(bytes);
  file.write(bytes.data(), bytes.size());
  for (bool train : {false, true}) {
    fuzz::accepts([&] { check(data::CIFAR10(file.path(), train)); });
  }
  return 0;
}
