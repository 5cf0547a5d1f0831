#include "render.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include "qflow/core/error.h"

namespace qflow::tools {

namespace {

// The path as one single-quoted shell word.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

bool graphviz_available() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

void write_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  QFLOW_CHECK(!ec, "cannot create the directory {}: {}", p.parent_path().string(), ec.message());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  QFLOW_CHECK(out.good(), "cannot open {} for writing", path);
  out << text;
  out.close();
  QFLOW_CHECK(out.good(), "writing {} failed", path);
}

void render_graphviz(const std::string& dot_path, const std::string& format, const std::string& out_path) {
  QFLOW_CHECK(graphviz_available(),
              "Graphviz's `dot` is not installed, so no {} was made (install it: apt-get install graphviz); "
              "the dot file {} is written and renders with `dot -T{} {} -o {}`",
              format, dot_path, format, dot_path, out_path);
  const std::string cmd =
      "dot -T" + format + " " + shell_quote(dot_path) + " -o " + shell_quote(out_path) + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  QFLOW_CHECK(pipe != nullptr, "cannot run Graphviz: {}", cmd);
  std::string messages;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) messages += buffer;
  const int status = ::pclose(pipe);
  const bool ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  QFLOW_CHECK(ok && std::filesystem::exists(out_path), "Graphviz failed to render {} as {}: {}", dot_path, format,
              messages.empty() ? "no message" : messages);
}

}  // namespace qflow::tools
