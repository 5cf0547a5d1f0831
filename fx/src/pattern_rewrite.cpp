// replace_chain / replace_pattern: one call_module node in place of a matched chain.
// See Note [Chain patterns] in pattern.h.
#include <algorithm>
#include <unordered_set>

#include "qflow/fx/pattern.h"

namespace qflow::fx {

namespace {

// True when `path` is a module some node calls, or holds an attribute some get_attr reads,
// ignoring the nodes in `except`.
bool is_targeted(const Graph& graph, const std::string& path, const std::unordered_set<const Node*>& except = {}) {
  const std::string below = path + ".";
  for (const Node* n : graph) {
    if (except.count(n)) continue;
    if (n->op() == NodeOp::CallModule && n->target() == path) return true;
    if ((n->op() == NodeOp::CallModule || n->op() == NodeOp::GetAttr) && n->target().compare(0, below.size(), below) == 0)
      return true;
  }
  return false;
}

std::string parent_of(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

bool is_empty_container(const nn::Module& m) {
  return dynamic_cast<const ModuleContainer*>(&m) != nullptr && m.named_children().empty() &&
         m.named_parameters(false).empty() && m.named_buffers(false).empty();
}

// A path beside `base` that names no submodule or attribute of gm: "conv1_fused", "conv1_fused_1".
std::string fresh_path(const GraphModule& gm, const std::string& base) {
  auto taken = [&](const std::string& p) {
    try {
      gm.get_submodule(p);
      return true;
    } catch (const Error&) {
      return gm.has_attr(p);
    }
  };
  std::string path = base + "_fused";
  for (int i = 1; taken(path); ++i) path = fmt::format("{}_fused_{}", base, i);
  return path;
}

void check_match(const Graph& graph, const Match& match, const std::unordered_set<const Node*>& inside) {
  QFLOW_CHECK(!match.nodes.empty(), "fx::replace_chain: the match is empty");
  for (const Node* n : match.nodes) {
    // An erased node stays alive, so a stale match is told apart by its flag (Note [Erasing during a walk]).
    QFLOW_CHECK(&n->graph() == &graph, "fx::replace_chain: a node of the match is not in this graph");
    QFLOW_CHECK(!n->erased(), "fx::replace_chain: %{} of the match was erased (a stale match)", n->name());
    QFLOW_CHECK(n->op() != NodeOp::Placeholder && n->op() != NodeOp::Output,
                "fx::replace_chain: %{} is a {} node and cannot be replaced", n->name(), op_name(n->op()));
  }
  for (size_t i = 0; i + 1 < match.nodes.size(); ++i) {
    for (const Node* u : match.nodes[i]->users())
      QFLOW_CHECK(inside.count(u), "fx::replace_chain: %{} is also used by %{} outside the match, so it cannot be replaced",
                  match.nodes[i]->name(), u->name());
  }
}

}  // namespace

void delete_unused_submodule(GraphModule& gm, const std::string& path) {
  if (is_targeted(gm.graph(), path) || !gm.delete_submodule(path)) return;
  for (std::string p = parent_of(path); !p.empty(); p = parent_of(p)) {
    if (is_targeted(gm.graph(), p) || !is_empty_container(*gm.get_submodule(p))) return;
    gm.delete_submodule(p);
  }
}

Node* replace_chain(GraphModule& gm, const Match& match, nn::ModulePtr module, std::string path) {
  QFLOW_CHECK(module != nullptr, "fx::replace_chain: the replacement module is null");
  Graph& graph = gm.graph();
  const std::unordered_set<const Node*> inside(match.nodes.begin(), match.nodes.end());
  check_match(graph, match, inside);

  std::vector<std::string> old_modules;
  for (const Node* n : match.nodes)
    if (n->op() == NodeOp::CallModule) old_modules.push_back(n->target());
  if (path.empty()) {
    // Take the place of the first module when only this chain calls it; see replace_chain's contract.
    if (!old_modules.empty() && !is_targeted(graph, old_modules[0], inside)) path = old_modules[0];
    else path = fresh_path(gm, old_modules.empty() ? match.first()->name() : old_modules[0]);
  } else {
    QFLOW_CHECK(!is_targeted(graph, path, inside),
                "fx::replace_chain: '{}' is used by nodes outside the match; installing another module there would change them",
                path);
  }
  gm.add_submodule(path, std::move(module));

  Node* first = match.first();
  Node* last = match.last();
  const std::string name = first->name();
  Node* fused = nullptr;
  {
    auto guard = graph.inserting_before(last);  // after every input of the chain, before every user of last
    fused = graph.create_node(NodeOp::CallModule, path, first->args(), first->kwargs(), name);
  }
  fused->meta().outputs = last->meta().outputs;
  last->replace_all_uses_with(fused);
  for (auto it = match.nodes.rbegin(); it != match.nodes.rend(); ++it) graph.erase_node(*it);
  if (fused->name() != name && graph.find_node(name) == nullptr) graph.rename(fused, name);

  for (const std::string& old : old_modules)
    if (old != path) delete_unused_submodule(gm, old);
  return fused;
}

size_t replace_pattern(GraphModule& gm, const Pattern& pattern, const ChainRewrite& rewrite) {
  QFLOW_CHECK(rewrite != nullptr, "fx::replace_pattern: the rewrite function for {} is empty", describe(pattern));
  size_t replaced = 0;
  for (const Match& m : match_chains(gm, pattern)) {
    nn::ModulePtr module = rewrite(gm, m);
    if (!module) continue;
    replace_chain(gm, m, std::move(module));
    ++replaced;
  }
  gm.recompile();
  return replaced;
}

}  // namespace qflow::fx
