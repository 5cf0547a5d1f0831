// Printing modules the way PyTorch's nn.Module.__repr__ does.
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <ostream>
#include <sstream>
#include <typeinfo>

#include "qflow/nn/module.h"

namespace qflow::nn {

namespace {

// "qflow::nn::Conv2d" -> "Conv2d", "Test_Body()::Net" -> "Net", "ns::Box<a::B>" -> "Box<a::B>":
// the last scope component outside template arguments and parameter lists.
std::string unqualified(const std::string& name) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    else if (c == '>' || c == ')') --depth;
    else if (depth == 0 && c == ':' && i + 1 < name.size() && name[i + 1] == ':') start = i + 2;
  }
  return name.substr(start);
}

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(mangled);
}

// PyTorch's _addindent: indent every line but the first.
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  const std::string pad(static_cast<size_t>(spaces), ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string Module::type_name() const { return unqualified(demangle(typeid(*this).name())); }

void Module::fail_cast(const Module& m, const char* op, const std::type_info& wanted) {
  QFLOW_FAIL("{}: the module is a {}, which is not a {}", op, m.type_name(), unqualified(demangle(wanted.name())));
}

std::string Module::repr() const {
  const std::string extra = extra_repr();
  const std::vector<std::string> extra_lines = extra.empty() ? std::vector<std::string>{} : split_lines(extra);
  std::vector<std::string> child_lines;
  for (const auto& [name, child] : children_) {
    child_lines.push_back("(" + name + "): " + add_indent(child->repr(), 2));
  }
  std::string out = type_name() + "(";
  if (extra_lines.size() == 1 && child_lines.empty()) {
    out += extra_lines[0];  // the one-liner most layers print
  } else if (!extra_lines.empty() || !child_lines.empty()) {
    std::vector<std::string> lines = extra_lines;
    lines.insert(lines.end(), child_lines.begin(), child_lines.end());
    out += "\n  " + fmt::format("{}", fmt::join(lines, "\n  ")) + "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace qflow::nn
