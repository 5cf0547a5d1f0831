#pragma once
// Shared by the fuzz targets (fuzz/fuzz_*.cpp): the verdict on a reader's answer, and
// in-memory files for readers that only take paths.
//
// Note [Fuzzing the readers]
// Every target feeds one libFuzzer input to one reader, the way a user's file reaches it.
// A qflow::Error is the correct answer to a bad file, so targets catch exactly that; any other
// exception escapes and aborts the run (libFuzzer reports it as a crash), like ASan and UBSan
// findings, leaks, and timeouts. Readers that only take a path read the input from a memfd
// through /proc/self/fd/N, so the fuzzed code is the production code, down to open(),
// fstat() and the gzip sniffing. Targets also check properties of a successful read (a file
// that loads must save and load again unchanged, labels are in range) and abort when they fail.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "qflow/core/error.h"

namespace qflow::fuzz {

/// Runs `fn` and swallows a qflow::Error (the reader refused the input); returns whether `fn`
/// completed.
template <typename Fn>
bool accepts(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const qflow::Error&) {
    return false;
  }
}

/// Aborts with `what` when `cond` is false: a property of an accepted input does not hold.
inline void require(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "qflow fuzz: property violated: %s\n", what);
    std::abort();
  }
}

/// An anonymous in-memory file with a path (/proc/self/fd/N), rewritten for every input.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  void write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("pwrite");
      done += static_cast<size_t>(n);
    }
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_;
  std::string path_;
};

}  // namespace qflow::fuzz
