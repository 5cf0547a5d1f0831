#pragma once
// Writing a graph's dot text and rendering it with Graphviz's `dot` executable.
#include <string>

namespace qflow::tools {

/// True when Graphviz's `dot` is on PATH.
bool graphviz_available();
/// Writes `text` to `path`, creating missing parent directories; throws qflow::Error on failure.
void write_text_file(const std::string& path, const std::string& text);
/// Runs `dot -T<format> dot_path -o out_path` (format: png, svg, ...). Throws qflow::Error
/// with Graphviz's own message when it fails or is not installed.
void render_graphviz(const std::string& dot_path, const std::string& format, const std::string& out_path);

}  // namespace qflow::tools
