#pragma once
// Sequential byte sources for the dataset readers: plain files, gzip streams (zlib) and
// in-memory buffers. Every source has a name, so a reader several layers up can say which
// file (and which archive member) a bad byte came from. See Note [Streaming readers].
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qflow::data {

// Note [Streaming readers]
// Dataset files are read front to back through a ByteReader instead of being loaded whole:
// a gzip stream or a tar member is decompressed straight into the dataset's final buffer, so
// `cifar-10-binary.tar.gz` never exists unpacked, neither on disk nor in memory. Sizes read
// from a header are never trusted for allocation: buffers grow as data actually arrives, so
// a header that lies about its size ends in a "truncated" error, not in a huge allocation.

/// A sequential source of bytes.
class ByteReader {
 public:
  virtual ~ByteReader() = default;
  /// Reads up to `n` bytes into `dst`; returns fewer only at the end of the data.
  virtual size_t read(void* dst, size_t n) = 0;
  /// Bytes delivered so far: the offset of the next byte (in the uncompressed stream).
  virtual uint64_t position() const = 0;
  /// The name error messages use: a file path, or "archive.tar.gz:member".
  virtual const std::string& name() const = 0;
  /// Total size when known up front (plain files and memory), nullopt for streams.
  virtual std::optional<uint64_t> size() const { return std::nullopt; }

  /// Reads exactly `n` bytes or throws "<name>: truncated ... <what> at offset ...".
  void read_exact(void* dst, size_t n, std::string_view what);
  /// Reads and discards `n` bytes; throws like read_exact when the data ends first.
  void skip(uint64_t n, std::string_view what);
  /// Throws "<name>: unexpected trailing data at offset ..." unless the data has ended.
  void expect_end(std::string_view after_what);
};

/// A plain file, read through a large buffer.
class FileReader final : public ByteReader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader() override;
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  size_t read(void* dst, size_t n) override;
  uint64_t position() const override { return position_; }
  const std::string& name() const override { return path_; }
  std::optional<uint64_t> size() const override { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t position_ = 0;
};

/// Bytes already in memory (tests, small files).
class MemoryReader final : public ByteReader {
 public:
  MemoryReader(std::vector<uint8_t> bytes, std::string name);

  size_t read(void* dst, size_t n) override;
  uint64_t position() const override { return position_; }
  const std::string& name() const override { return name_; }
  std::optional<uint64_t> size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
  uint64_t position_ = 0;
};

/// Decompresses a gzip stream (one or more concatenated members, as `gzip` writes them) read
/// from `source`. A corrupt or truncated stream throws, naming the source and the offset of
/// the compressed byte where decompression failed.
class GzipReader final : public ByteReader {
 public:
  explicit GzipReader(std::unique_ptr<ByteReader> source);
  ~GzipReader() override;
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  size_t read(void* dst, size_t n) override;
  uint64_t position() const override { return position_; }
  const std::string& name() const override { return source_->name(); }

 private:
  bool refill();
  bool start_next_member();

  struct ZState;
  std::unique_ptr<ByteReader> source_;
  std::unique_ptr<ZState> z_;
  std::vector<uint8_t> in_;
  uint64_t position_ = 0;
  bool finished_ = false;
};

/// True when `path` starts with the gzip magic bytes 1f 8b.
bool is_gzip_file(const std::string& path);

/// Opens `path` for reading, decompressing on the fly when it is a gzip file (detected by
/// its magic bytes, not its name).
std::unique_ptr<ByteReader> open_file(const std::string& path);

}  // namespace qflow::data
