#pragma once
// Child processes under a watchdog, shared by the tests that run programs (tests/tools) or
// fork writers (tests/nn/checkpoint_crash_test.cpp).
//
// These tests assert what a program does — a dead rank ends the job, a killed writer leaves
// the old file — never how fast: a sanitizer build on two busy cores may be many times slower
// than a release build, and a deadline of seconds would fail there without a defect. So no
// test waits with a deadline that ends in a verdict about time. A child that never finishes
// (or never reaches the state the test waits for) is still caught: after kHangLimit, far
// beyond any of these waits on the slowest build, the watchdog kills the child's whole
// process group and fails the test saying that it hung, with the child's output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// How long a child may run, or a test wait for a child to get somewhere, before the test
/// calls it hung. Not a performance bound; below ctest's default timeout (1500 s), so a hang
/// is reported with the child's output rather than as a killed test binary.
inline constexpr std::chrono::seconds kHangLimit{600};

/// The text of a file ("" when it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A child process in its own process group, so that killing the group stops everything it
/// started (a shell, mpirun and its ranks). Its stdin is /dev/null (a background process group
/// reading a terminal would stop); its stdout and stderr go to `log` when one is given. The
/// destructor kills and reaps a child still running: a failed test leaves no process behind.
class ChildProcess {
 public:
  /// Runs `body` in a forked child, which exits with the status `body` returns.
  ChildProcess(const std::function<int()>& body, std::string log = "") : log_(std::move(log)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      if (const int in = ::open("/dev/null", O_RDONLY); in >= 0) ::dup2(in, 0);
      if (!log_.empty()) {
        const int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out >= 0) ::dup2(out, 1), ::dup2(out, 2);
      }
      std::_Exit(body());
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);  // also here: no race with the child's own call
  }
  /// Runs a shell command line (`/bin/sh -c command`).
  static ChildProcess shell(const std::string& command, std::string log = "") {
    return ChildProcess(
        [command] {
          ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
          return 127;
        },
        std::move(log));
  }
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_), status_(o.status_), log_(std::move(o.log_)), hung_(o.hung_) {
    o.pid_ = -1;
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (running()) kill_group();
  }

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  /// Whether the child is still running (reaps it when it has exited).
  bool running() {
    if (pid_ <= 0 || status_) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) status_ = status;
    if (r < 0 && errno == ECHILD) status_ = -1;  // reaped elsewhere: gone, status unknown
    return !status_;
  }
  /// The wait status once the child has exited.
  std::optional<int> status() {
    running();
    return status_;
  }
  /// Whether the watchdog fired (the test has failed saying so, the child is killed).
  bool hung() const { return hung_; }
  /// What the child wrote to its log so far.
  std::string output() const { return log_.empty() ? std::string() : file_text(log_); }

  /// Polls `condition` until it holds (true), or the child has exited without it holding
  /// (false; the condition is asked once more after the exit), or kHangLimit has passed
  /// (false; the child is killed and the test fails saying it hung waiting for `what`).
  /// (`limit` other than kHangLimit only for the watchdog's own test.)
  bool wait_until(const std::function<bool()>& condition, const std::string& what,
                  std::chrono::milliseconds poll = std::chrono::milliseconds(20),
                  std::chrono::milliseconds limit = kHangLimit) {
    const auto start = std::chrono::steady_clock::now();
    while (true) {
      if (condition()) return true;
      if (!running()) return condition();
      if (std::chrono::steady_clock::now() - start > limit) {
        report_hang(what, limit);
        return false;
      }
      std::this_thread::sleep_for(poll);
    }
  }

  /// Waits for the child to exit; returns its wait status. A child still running after
  /// kHangLimit is killed with its process group and the test fails saying it hung (the status
  /// returned is then the kill's).
  int wait(const std::string& what = "the child to exit", std::chrono::milliseconds limit = kHangLimit) {
    wait_until([] { return false; }, what, std::chrono::milliseconds(20), limit);
    kill_group();  // reaps; a no-op when it exited by itself
    return status_.value_or(-1);
  }

  /// Sends `signal` to the child's process group and, for SIGKILL, reaps the child.
  void kill_group(int signal = SIGKILL) {
    if (pid_ <= 0 || status_) return;
    ::kill(-pid_, signal);
    if (signal == SIGKILL) {
      int status = 0;
      if (::waitpid(pid_, &status, 0) == pid_) status_ = status;
    }
  }

 private:
  void report_hang(const std::string& what, std::chrono::milliseconds limit) {
    hung_ = true;
    kill_group();
    ADD_FAILURE() << "hung: still waiting for " << what << " after " << fmt::format("{:g}", limit.count() / 1000.0)
                  << " s (a limit no run should come near); killed the child process group. Its output:\n"
                  << output();
  }

  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_;
  bool hung_ = false;
};

/// Runs a shell command line with its output in `log` under the watchdog; returns its wait
/// status (as std::system does).
inline int run_watched(const std::string& command, const std::string& log) {
  ChildProcess child = ChildProcess::shell(command, log);
  if (!child.started()) {
    ADD_FAILURE() << "fork failed for: " << command;
    return -1;
  }
  return child.wait("`" + command + "` to finish");
}

/// The exit code of a wait status; -1 when the process did not exit (a signal killed it).
inline int exit_code(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

}  // namespace qflow::testing_util
