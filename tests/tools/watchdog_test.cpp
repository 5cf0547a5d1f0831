// The watchdog of tests/watchdog.h, which the tools tests wait on instead of deadlines: a child
// that hangs is killed with everything it started and the test fails saying it hung, with the
// child's output; a child that ends is waited for however long it takes.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>
#include <thread>

#include "watchdog.h"

using namespace qflow::testing_util;

namespace {

std::string temp_file(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("qflow_watchdog_") + name + std::to_string(::getpid())))
      .string();
}

// A child that hangs: a shell that starts a grandchild and waits for it.
void hang_and_check(const std::string& log, const std::string& pid_file) {
  ChildProcess child = ChildProcess::shell("echo started; sleep 600 & echo $! > " + pid_file + "; wait", log);
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.wait_until([&] { return file_text(pid_file).ends_with("\n"); }, "the grandchild's pid"));
  child.wait("a child that sleeps", std::chrono::milliseconds(300));
  EXPECT_TRUE(child.hung());
}

}  // namespace

TEST(WatchdogTest, AHungChildIsKilledWithItsProcessGroupAndReported) {
  const std::string log = temp_file("log"), pid_file = temp_file("pid");
  EXPECT_NONFATAL_FAILURE(hang_and_check(log, pid_file), "hung: still waiting for a child that sleeps after 0.3 s");
  // The grandchild went with the group.
  const std::string grandchild = file_text(pid_file);
  ASSERT_FALSE(grandchild.empty());
  // Gone, or a zombie waiting for init to reap it ("Z" in /proc/PID/stat), not running. SIGKILL
  // takes effect when the process next runs: on a loaded machine it can still show "R" for a
  // moment after the kill, so it gets a few seconds to die (a survivor sleeps for 600).
  const std::string stat_path = "/proc/" + grandchild.substr(0, grandchild.find('\n')) + "/stat";
  auto dead = [](const std::string& stat) {
    const size_t state = stat.rfind(')');
    return stat.empty() || (state != std::string::npos && stat.substr(state + 2, 1) == "Z");
  };
  std::string stat = file_text(stat_path);
  for (int i = 0; i < 500 && !dead(stat); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stat = file_text(stat_path);
  }
  EXPECT_TRUE(dead(stat)) << "the grandchild survived: " << stat;
  std::filesystem::remove(log);
  std::filesystem::remove(pid_file);
}

TEST(WatchdogTest, TheReportCarriesTheChildsOutput) {
  const std::string log = temp_file("out");
  EXPECT_NONFATAL_FAILURE(
      {
        ChildProcess child = ChildProcess::shell("echo the-last-words; exec sleep 600", temp_file("out"));
        child.wait_until([] { return false; }, "nothing", std::chrono::milliseconds(10), std::chrono::milliseconds(500));
      },
      "the-last-words");
  std::filesystem::remove(log);
}

TEST(WatchdogTest, AChildThatEndsIsWaitedForAndItsStatusReturned) {
  const std::string log = temp_file("ends");
  EXPECT_EQ(exit_code(run_watched("echo hi; exit 3", log)), 3);
  EXPECT_EQ(file_text(log), "hi\n");
  ChildProcess child = ChildProcess::shell("exit 0");
  EXPECT_FALSE(child.wait_until([] { return false; }, "a condition that never holds"));  // ended: false, no failure
  EXPECT_FALSE(child.hung());
  EXPECT_EQ(child.status(), 0);
  std::filesystem::remove(log);
}
