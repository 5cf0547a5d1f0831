// ByteReader helpers, plain files and memory buffers. (Gzip streams: gzip_reader.cpp.)
#include "qflow/data/byte_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "qflow/core/error.h"

namespace qflow::data {

namespace {
// strerror is not thread-safe; the error category's message is.
std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }
}  // namespace

void ByteReader::read_exact(void* dst, size_t n, std::string_view what) {
  const uint64_t start = position();
  const size_t got = read(dst, n);
  QFLOW_CHECK(got == n, "{}: truncated: {} at offset {} needs {} bytes, only {} left", name(), what, start, n, got);
}

void ByteReader::skip(uint64_t n, std::string_view what) {
  uint8_t scratch[16384];
  const uint64_t start = position();
  uint64_t left = n;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, sizeof(scratch)));
    const size_t got = read(scratch, want);
    QFLOW_CHECK(got == want, "{}: truncated: {} at offset {} needs {} bytes, only {} left", name(), what, start, n,
                n - left + got);
    left -= got;
  }
}

void ByteReader::expect_end(std::string_view after_what) {
  uint8_t byte = 0;
  const uint64_t at = position();
  QFLOW_CHECK(read(&byte, 1) == 0, "{}: oversized: unexpected trailing data at offset {} after {}", name(), at, after_what);
}

// ---- FileReader ---------------------------------------------------------------------------------
FileReader::FileReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QFLOW_CHECK(fd_ >= 0, "{}: cannot open: {}", path, errno_text(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  const int err = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd_);  // the destructor does not run for a throwing constructor
    fd_ = -1;
    QFLOW_CHECK(stat_ok, "{}: cannot stat: {}", path, errno_text(err));
    QFLOW_FAIL("{}: not a regular file", path);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  // Dataset files are read once, front to back.
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

size_t FileReader::read(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, out + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    QFLOW_CHECK(got >= 0, "{}: read failed at offset {}: {}", path_, position_ + done, errno_text(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  position_ += done;
  return done;
}

// ---- MemoryReader -------------------------------------------------------------------------------
MemoryReader::MemoryReader(std::vector<uint8_t> bytes, std::string name)
    : bytes_(std::move(bytes)), name_(std::move(name)) {}

size_t MemoryReader::read(void* dst, size_t n) {
  const size_t got = static_cast<size_t>(std::min<uint64_t>(n, bytes_.size() - position_));
  if (got > 0) std::memcpy(dst, bytes_.data() + position_, got);
  position_ += got;
  return got;
}

// ---- opening ------------------------------------------------------------------------------------
bool is_gzip_file(const std::string& path) {
  FileReader file(path);
  uint8_t magic[2] = {0, 0};
  return file.read(magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::unique_ptr<ByteReader> open_file(const std::string& path) {
  auto file = std::make_unique<FileReader>(path);
  if (is_gzip_file(path)) return std::make_unique<GzipReader>(std::move(file));
  return file;
}

}  // namespace qflow::data
