#include "file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <new>
#include <system_error>

#include "qflow/core/error.h"

namespace qflow::nn::detail {

namespace {

// strerror is not thread-safe; the error category's message is.
std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// Closes a descriptor on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close's errno (0 on success): close can be where a delayed
  // write error (NFS, quota) surfaces.
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Writes all of `data`, retrying short writes and EINTR; returns 0 or the errno.
int write_all(int fd, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::atomic<uint64_t> g_temp_counter{0};

}  // namespace

std::vector<uint8_t> read_whole_file(const std::string& path, const char* op) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  QFLOW_CHECK(fd.get() >= 0, "{}: cannot open '{}': {}", op, path, errno_text(errno));
  struct stat st {};
  QFLOW_CHECK(::fstat(fd.get(), &st) == 0, "{}: cannot stat '{}': {}", op, path, errno_text(errno));
  QFLOW_CHECK(S_ISREG(st.st_mode), "{}: '{}' is not a regular file", op, path);
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    QFLOW_FAIL("{}: '{}' ({} bytes) does not fit in memory", op, path, st.st_size);
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    QFLOW_CHECK(n >= 0, "{}: reading '{}' failed: {}", op, path, errno_text(errno));
    QFLOW_CHECK(n > 0, "{}: '{}' shrank while being read ({} of {} bytes)", op, path, done, bytes.size());
    done += static_cast<size_t>(n);
  }
  return bytes;
}

void write_file_atomically(const std::string& path, std::span<const std::span<const uint8_t>> chunks, const char* op) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string base = target.filename().string();
  QFLOW_CHECK(!base.empty() && base != "." && base != "..", "{}: '{}' does not name a file", op, path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");

  // Same directory as the target, so rename() is atomic; O_EXCL so we never clobber a file.
  std::string temp;
  int raw_fd = -1;
  for (int attempt = 0; attempt < 100 && raw_fd < 0; ++attempt) {
    temp = (dir / fmt::format(".{}.{}.{}.tmp", base, ::getpid(), g_temp_counter.fetch_add(1))).string();
    raw_fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (raw_fd < 0 && errno != EEXIST) break;
  }
  QFLOW_CHECK(raw_fd >= 0, "{}: cannot create a temporary file next to '{}': {}", op, path, errno_text(errno));
  Fd fd(raw_fd);

  auto fail = [&](const char* step, int err) {
    ::unlink(temp.c_str());
    QFLOW_FAIL("{}: {} '{}' failed: {} (any previous file at that path is unchanged)", op, step, path,
               errno_text(err));
  };
  for (std::span<const uint8_t> chunk : chunks) {
    if (int err = write_all(fd.get(), chunk)) fail("writing", err);
  }
  if (::fsync(fd.get()) != 0) fail("syncing", errno);
  if (int err = fd.close_checked()) fail("closing", err);
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("renaming the temporary file to", errno);

  // Make the rename itself durable. Some filesystems cannot sync directories (EINVAL).
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0 && ::fsync(dir_fd.get()) != 0 && errno != EINVAL) {
    QFLOW_FAIL("{}: '{}' was written but syncing its directory failed: {}", op, path, errno_text(errno));
  }
}

}  // namespace qflow::nn::detail
