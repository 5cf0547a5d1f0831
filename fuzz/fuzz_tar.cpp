// libFuzzer target: a tar or .tar.gz archive -> GzipReader (zlib) + TarReader, every member
// read to its end in uneven chunks. See Note [Fuzzing the readers] and tar_fixup.h.
#include <memory>

#include "fuzz_util.h"
#include "qflow/data/byte_reader.h"
#include "qflow/data/tar_reader.h"
#include "tar_fixup.h"

using namespace qflow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  const bool gzip = fuzz::is_gzip(data, size);
  if (!gzip) fuzz::fix_tar_checksums(bytes);
  std::unique_ptr<data::ByteReader> source = std::make_unique<data::MemoryReader>(std::move(bytes), "fuzz.tar");
  if (gzip) source = std::make_unique<data::GzipReader>(std::move(source));
  fuzz::accepts([&] {
    data::TarReader tar(*source);
    uint8_t buffer[700];
    size_t chunk = 1;
    int members = 0;
    while (auto entry = tar.next()) {
      data::ByteReader& member = tar.member();
      fuzz::require(member.size() == entry->size, "the member reader has the entry's size");
      // Leave every third member unread: next() must skip what is left of it.
      if (++members % 3 == 0) continue;
      uint64_t got = 0;
      while (size_t n = member.read(buffer, chunk)) {
        got += n;
        chunk = (chunk + 97) % sizeof(buffer) + 1;  // 1..700 bytes
      }
      fuzz::require(got == entry->size && member.position() == got, "a member delivers exactly its size");
    }
  });
  return 0;
}
