#pragma once
// A streaming reader for tar archives (POSIX ustar, GNU and pax extensions): enough to read
// dataset archives such as `cifar-10-binary.tar.gz` member by member without unpacking them.
#include <cstdint>
#include <optional>
#include <string>

#include "qflow/data/byte_reader.h"

namespace qflow::data {

/// One archive member.
struct TarEntry {
  std::string path;            ///< Member path (GNU long names and pax `path` resolved).
  char type = '0';             ///< ustar typeflag: '0' file, '5' directory, '2' symlink, ...
  uint64_t size = 0;           ///< Data bytes that follow the header.
  uint64_t header_offset = 0;  ///< Offset of the member's header in the archive.
  bool is_file() const { return type == '0' || type == '\0' || type == '7'; }
};

/// Reads members in archive order from an uncompressed tar stream (wrap a GzipReader around
/// the file for .tar.gz). Every header is validated — checksum, magic, octal fields — and a
/// bad one throws naming the archive and the header's offset.
class TarReader {
 public:
  explicit TarReader(ByteReader& archive);

  /// Advances to the next member (skipping what is left of the current one); nullopt at the
  /// end of the archive.
  std::optional<TarEntry> next();

  /// A reader over the current member's data, named "<archive>:<member>"; valid until the
  /// next call to next().
  ByteReader& member();

 private:
  class MemberReader final : public ByteReader {
   public:
    explicit MemberReader(ByteReader& archive) : archive_(archive) {}
    void reset(std::string name, uint64_t size);
    size_t read(void* dst, size_t n) override;
    uint64_t position() const override { return position_; }
    const std::string& name() const override { return name_; }
    std::optional<uint64_t> size() const override { return size_; }
    uint64_t remaining() const { return size_ - position_; }

   private:
    ByteReader& archive_;
    std::string name_;
    uint64_t size_ = 0;
    uint64_t position_ = 0;
  };

  /// Reads one 512-byte header block; false at a clean end of the archive.
  bool read_header(uint8_t (&block)[512], uint64_t& offset);
  /// The data of a GNU long-name or pax header member, bounded in size.
  std::string read_meta_data(uint64_t size, uint64_t header_offset, const char* what);
  void finish_member();

  ByteReader& archive_;
  MemberReader member_;
  bool in_member_ = false;
  bool ended_ = false;
};

namespace detail {
/// Parses a tar numeric field: octal digits (optionally space-padded, NUL/space terminated)
/// or GNU base-256 (high bit of the first byte set). nullopt for anything malformed.
std::optional<uint64_t> parse_tar_number(const uint8_t* field, size_t width);
}  // namespace detail

}  // namespace qflow::data
