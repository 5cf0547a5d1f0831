// libFuzzer target: an IDX file, plain or gzip-compressed (MNIST, Fashion-MNIST) ->
// data::read_idx, through a file path like MNIST reads it. See Note [Fuzzing the readers].
#include "fuzz_util.h"
#include "qflow/data/idx.h"

using namespace qflow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file("fuzz-idx3-ubyte");
  file.write(data, size);
  Tensor t;
  if (!fuzz::accepts([&] { t = data::read_idx(file.path()); })) return 0;
  // (Core calls some empty tensors non-contiguous, e.g. shape [2, 0]; their strides do not matter.)
  fuzz::require(t.dtype() == DType::UInt8 && (t.is_contiguous() || t.numel() == 0), "an IDX tensor is contiguous uint8");
  // A plain file holds the header (4 + 4 * dims bytes) and exactly the tensor's bytes.
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  fuzz::require(gzip || size == 4 + 4 * t.sizes().size() + t.nbytes(), "a plain IDX file is header + data");
  if (!gzip && t.nbytes() > 0) {
    const auto* p = t.data_ptr<uint8_t>();
    const size_t header = size - t.nbytes();
    fuzz::require(p[0] == data[header] && p[t.nbytes() - 1] == data[size - 1], "IDX bytes are the file's bytes");
  }
  return 0;
}
