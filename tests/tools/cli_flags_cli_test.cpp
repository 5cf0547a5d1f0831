// The flags the tools share (tools/common/cli_flags.h) are checked the same way in each: the
// same value is refused with the same message by qflow-train, qflow-export and qflow-graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "qflow/qflow.h"

using ::testing::HasSubstr;

namespace {

struct ToolRun {
  int status = 0;
  std::string output;
};

ToolRun run_tool(const std::string& tool, const std::string& args) {
  const std::string log =
      (std::filesystem::temp_directory_path() / fmt::format("qflow_cli_flags_{}_{}.txt", tool, ::getpid())).string();
  ToolRun r;
  r.status = std::system((std::string(QFLOW_BIN_DIR) + "/" + tool + " " + args + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  r.output = s.str();
  std::filesystem::remove(log);
  return r;
}

const char* kQuantTools[] = {"qflow-train", "qflow-export", "qflow-graph"};

}  // namespace

TEST(CliFlagsTest, EveryToolRefusesBitsOutOfRangeWithTheSameMessage) {
  for (const char* bad : {"99", "1", "8.5", "eight"})
    for (const char* tool : kQuantTools) {
      const ToolRun r = run_tool(tool, std::string("--bits ") + bad);
      EXPECT_NE(r.status, 0) << tool;
      EXPECT_THAT(r.output, HasSubstr(fmt::format("--bits: must be an integer from 2 to 16, got '{}'", bad))) << tool;
    }
}

TEST(CliFlagsTest, EveryToolRefusesAnUnknownModelWithTheSameMessage) {
  const std::string known = "unknown model 'resnet19' (known: " + fmt::format("{}", fmt::join(qflow::models::model_names(), ", ")) + ")";
  for (const char* tool : kQuantTools) {
    const ToolRun r = run_tool(tool, "--model resnet19");
    EXPECT_NE(r.status, 0) << tool;
    EXPECT_THAT(r.output, HasSubstr(known)) << tool;
  }
}

TEST(CliFlagsTest, EveryToolDescribesTheSharedFlagsAlike) {
  for (const char* tool : kQuantTools) {
    const ToolRun r = run_tool(tool, "--help");
    EXPECT_EQ(r.status, 0) << tool;
    for (const char* text : {"--bits INT:2-16=8", "Quantization bits (2-16)", "--scheme TEXT:{symmetric,affine}=symmetric",
                             "--per-channel", "--qconfig TEXT:FILE"})
      EXPECT_THAT(r.output, HasSubstr(text)) << tool;
  }
  for (const char* tool : {"qflow-train", "qflow-show-data"}) {
    const ToolRun r = run_tool(tool, "--help");
    EXPECT_THAT(r.output, HasSubstr("--dataset TEXT:{cifar10,fashion-mnist,mnist,folder}")) << tool;
  }
}
