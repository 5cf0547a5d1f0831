// Chain patterns: node predicates and the data-flow matcher. See Note [Chain patterns].
// The rewriter lives in pattern_rewrite.cpp.
#include "qflow/fx/pattern.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <unordered_set>

namespace qflow::fx {

namespace detail {

std::string short_type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  std::string name = status == 0 && demangled ? demangled.get() : type.name();
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

}  // namespace detail

namespace {

// The submodule a call_module node runs, or null for other nodes and missing targets (a
// pattern asks "is this a Conv2d", it does not validate the graph: lint does).
const nn::Module* module_of(const Node& node, const GraphModule& gm) {
  if (node.op() != NodeOp::CallModule) return nullptr;
  try {
    return gm.get_submodule(node.target()).get();
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace

NodePattern module_type(std::type_index type, std::string description) {
  return {std::move(description), [type](const Node& n, const GraphModule& gm) {
            const nn::Module* m = module_of(n, gm);
            return m != nullptr && std::type_index(typeid(*m)) == type;
          }};
}

NodePattern module_named(std::string type_name) {
  return {type_name, [type_name](const Node& n, const GraphModule& gm) {
            const nn::Module* m = module_of(n, gm);
            return m != nullptr && m->type_name() == type_name;
          }};
}

NodePattern function(std::vector<std::string> targets) {
  QFLOW_CHECK(!targets.empty(), "fx::function: no target given");
  std::string description = targets.size() == 1 ? targets[0] : "";
  for (size_t i = 0; targets.size() > 1 && i < targets.size(); ++i) description += (i ? " | " : "") + targets[i];
  return {description, [targets = std::move(targets)](const Node& n, const GraphModule&) {
            if (n.op() != NodeOp::CallFunction && n.op() != NodeOp::CallMethod) return false;
            return std::find(targets.begin(), targets.end(), n.target()) != targets.end();
          }};
}

NodePattern any_of(std::vector<NodePattern> alternatives) {
  QFLOW_CHECK(!alternatives.empty(), "fx::any_of: no alternative given");
  std::string description = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) description += (i ? " | " : "") + alternatives[i].description;
  description += ")";
  return {description, [alternatives = std::move(alternatives)](const Node& n, const GraphModule& gm) {
            return std::any_of(alternatives.begin(), alternatives.end(), [&](const NodePattern& p) { return p.matches(n, gm); });
          }};
}

NodePattern where(std::string description, std::function<bool(const Node&, const GraphModule&)> predicate) {
  QFLOW_CHECK(predicate != nullptr, "fx::where: the predicate for '{}' is empty", description);
  return {std::move(description), std::move(predicate)};
}

std::string describe(const Pattern& pattern) {
  std::string s;
  for (size_t i = 0; i < pattern.size(); ++i) s += (i ? " -> " : "") + pattern[i].description;
  return s;
}

Match match_chain_at(const GraphModule& gm, Node& anchor, const Pattern& pattern) {
  QFLOW_CHECK(!pattern.empty(), "fx::match_chain_at: the pattern is empty");
  if (!pattern[0].matches(anchor, gm)) return {};
  Match m{{&anchor}};
  for (size_t i = 1; i < pattern.size(); ++i) {
    Node* prev = m.nodes.back();
    // The single-user rule (see Note [Chain patterns]); the user must take prev as its data
    // input, not as a side operand (add(other, prev) is not "prev followed by add").
    if (prev->users().size() != 1) return {};
    Node* next = prev->users()[0];
    if (next->args().empty() || !next->args()[0].is_node() || next->args()[0].node() != prev) return {};
    if (!pattern[i].matches(*next, gm)) return {};
    m.nodes.push_back(next);
  }
  return m;
}

std::vector<Match> match_chains(const GraphModule& gm, const Pattern& pattern) {
  QFLOW_CHECK(!pattern.empty(), "fx::match_chains: the pattern is empty");
  std::vector<Match> matches;
  std::unordered_set<const Node*> claimed;
  for (Node* n : gm.graph()) {
    if (claimed.count(n)) continue;
    Match m = match_chain_at(gm, *n, pattern);
    if (m.nodes.empty()) continue;
    if (std::any_of(m.nodes.begin(), m.nodes.end(), [&](const Node* x) { return claimed.count(x) > 0; })) continue;
    claimed.insert(m.nodes.begin(), m.nodes.end());
    matches.push_back(std::move(m));
  }
  return matches;
}

}  // namespace qflow::fx
