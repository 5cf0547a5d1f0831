#include "file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
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

// Writes all of `data`, retrying short writes and EINTR; returns 0 or the errno. `written`
// counts the bytes that reached the file, so a failure can say how far it got.
int write_all(int fd, std::span<const uint8_t> data, uint64_t& written) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
    written += static_cast<uint64_t>(n);
  }
  return 0;
}

std::atomic<uint64_t> g_temp_counter{0};

// Note [Interrupted writes]
// A process killed in the middle of write_file_atomically leaves its temporary file
// ".<name>.<pid>.<n>.tmp" behind (the target itself is intact). A training job that is
// preempted many times would pile them up, so every successful write of <name> removes the
// temporaries of <name> whose writer process no longer exists (kill(pid, 0) fails with
// ESRCH). Temporaries of live processes, including this one, are never touched, so
// concurrent writers in one process or on one host are safe; writers on several hosts
// sharing one directory are not supported (their pids mean nothing here).
// The tests that kill a writer half-way through pause it there from outside, with a library
// that interposes write(2) (tests/fixtures/pause_write.cpp); the data goes out through
// write_all's ::write calls, which is what that library relies on.
int64_t remove_abandoned_temporaries(const std::filesystem::path& dir, const std::string& base) {
  const std::string prefix = "." + base + ".";
  int64_t removed = 0;
  // Best effort with error codes only: the save itself has already succeeded.
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() + 4 || !name.starts_with(prefix) || !name.ends_with(".tmp")) continue;
    // The middle must be "<pid>.<n>": digits, one dot, digits.
    const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - 4);
    const size_t dot = middle.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == middle.size() ||
        middle.find_first_not_of("0123456789.") != std::string::npos || middle.find('.', dot + 1) != std::string::npos)
      continue;
    const long pid = std::strtol(middle.substr(0, dot).c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      removed += std::filesystem::remove(it->path(), ignored) ? 1 : 0;
    }
  }
  return removed;
}


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

  uint64_t total = 0, written = 0;
  for (std::span<const uint8_t> chunk : chunks) total += chunk.size();
  // Every failure names the file, how far the write got and the system's reason: on a full
  // disk the user needs all three to see which file did not fit and how much room it wanted.
  auto fail = [&](const char* step, int err) {
    ::unlink(temp.c_str());
    QFLOW_FAIL("{}: {} '{}' failed after {} of {} bytes: {} (any previous file at that path is unchanged)", op, step,
               path, written, total, errno_text(err));
  };
  for (std::span<const uint8_t> chunk : chunks)
    if (int err = write_all(fd.get(), chunk, written)) fail("writing", err);
  // A full disk often shows only here: filesystems with delayed allocation accept the
  // write() and fail the flush.
  if (::fsync(fd.get()) != 0) fail("syncing", errno);
  if (int err = fd.close_checked()) fail("closing", err);
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("renaming the temporary file to", errno);
  remove_abandoned_temporaries(dir, base);

  // Make the rename itself durable. Some filesystems cannot sync directories (EINVAL).
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0 && ::fsync(dir_fd.get()) != 0 && errno != EINVAL) {
    QFLOW_FAIL("{}: '{}' was written but syncing its directory failed: {}", op, path, errno_text(errno));
  }
}

}  // namespace qflow::nn::detail

namespace qflow::nn {

int64_t remove_abandoned_temporaries(const std::string& path) {
  const std::filesystem::path target(path);
  return detail::remove_abandoned_temporaries(target.has_parent_path() ? target.parent_path() : ".",
                                              target.filename().string());
}

}  // namespace qflow::nn
