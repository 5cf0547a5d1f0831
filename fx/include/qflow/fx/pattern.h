#pragma once
// Chain patterns: find module/function chains by data flow and replace each by one module.
//
//   fx::Pattern conv_bn_relu{fx::module_type<nn::Conv2d>(), fx::module_type<nn::BatchNorm2d>(),
//                            fx::any_of({fx::module_type<nn::ReLU>(), fx::function({"relu", "relu_"})})};
//   for (const fx::Match& m : fx::match_chains(*gm, conv_bn_relu)) ...           // read-only
//   fx::replace_pattern(*gm, conv_bn_relu, [](fx::GraphModule& gm, const fx::Match& m) {
//     return make_fused_module(gm, m);                                          // null: skip
//   });
//
// Note [Chain patterns]
// A chain pattern is a sequence of node predicates p0 → p1 → ... → pk. Nodes n0 ... nk match
// it when every ni satisfies pi and, for i < k, n(i+1) reads ni as its first argument and is
// the only user of ni. The matcher walks from a node to its users, never to its neighbour in
// the node list, so a match does not depend on how the graph's nodes are ordered or what
// sits between them (ARCHITECTURE.md §6). The single-user rule is what makes a rewrite safe: an
// intermediate value that something else reads (a conv output that feeds a BN and also a
// shortcut) must stay computed, so such a chain is not a match. The last node may have any
// number of users; they are rewired to the replacement. Matches never share a node: anchors
// are tried in graph order and a node claimed by an earlier match is not used again.
#include <functional>
#include <initializer_list>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "qflow/fx/graph_module.h"

namespace qflow::fx {

namespace detail {
/// The unqualified name of a C++ type ("Conv2d" for qflow::nn::Conv2d).
std::string short_type_name(const std::type_info& type);
}  // namespace detail

/// What one node of a chain must be. `description` names it in messages ("Conv2d", "relu").
struct NodePattern {
  std::string description;
  std::function<bool(const Node& node, const GraphModule& gm)> matches;
};

/// A call_module node whose submodule has exactly the dynamic type `type` (a subclass, e.g. a
/// quantized conv deriving from Conv2d, is not a match: it computes something else).
NodePattern module_type(std::type_index type, std::string description);
template <class M>
NodePattern module_type() {
  return module_type(std::type_index(typeid(M)), detail::short_type_name(typeid(M)));
}
/// A call_module node whose submodule's type_name() is `type_name` ("Conv2d", "GraphModule").
NodePattern module_named(std::string type_name);
/// A call_function or call_method node whose target is one of `targets` ("relu", "relu_").
NodePattern function(std::vector<std::string> targets);
/// A node satisfying any of `alternatives`.
NodePattern any_of(std::vector<NodePattern> alternatives);
/// A node satisfying `predicate` (conditions on module state, arguments, meta, ...).
NodePattern where(std::string description, std::function<bool(const Node&, const GraphModule&)> predicate);

/// The predicates of a chain, first to last. See Note [Chain patterns].
using Pattern = std::vector<NodePattern>;
/// "Conv2d -> BatchNorm2d -> (ReLU | relu)".
std::string describe(const Pattern& pattern);

/// The nodes of one match: nodes[i] satisfied pattern[i].
struct Match {
  std::vector<Node*> nodes;
  Node* first() const { return nodes.front(); }
  Node* last() const { return nodes.back(); }
};

/// The chain of `pattern` starting at `anchor`, or an empty Match when there is none.
Match match_chain_at(const GraphModule& gm, Node& anchor, const Pattern& pattern);
/// Every match of `pattern` in gm's graph, disjoint, ordered by their first node.
std::vector<Match> match_chains(const GraphModule& gm, const Pattern& pattern);

/// Replaces the nodes of `match` by one call_module node running `module`, and returns it.
///  - The new node reads the first node's args and kwargs (inputs that later nodes of the
///    chain read besides their predecessor are dropped: `module` must not need them), takes
///    the first node's place in the data flow and its name, and the last node's meta shapes.
///  - Every user of the last node reads the new node instead; the old nodes are erased.
///  - `module` is installed at `path`. An empty path means the first call_module target of
///    the match when no node outside the match calls that module (so a conv is replaced in
///    place and state_dict keeps its order), else a fresh path beside it ("conv1_fused").
///  - Submodules that the old nodes called and nothing calls any more are deleted, with
///    containers left empty by that.
/// Throws qflow::Error when the match is stale (a node no longer in the graph, or an inner
/// node used outside the chain) or an explicit `path` is a module other nodes still call.
Node* replace_chain(GraphModule& gm, const Match& match, nn::ModulePtr module, std::string path = {});

/// Deletes the submodule at `path` when no node targets it any more, then the containers this
/// left empty (a Sequential shortcut traced into "shortcut.0", "shortcut.1").
void delete_unused_submodule(GraphModule& gm, const std::string& path);

/// Builds the replacement of one match; null leaves that match as it is.
using ChainRewrite = std::function<nn::ModulePtr(GraphModule& gm, const Match& match)>;
/// torch.fx's replace_pattern for chains: replaces every match of `pattern` for which
/// `rewrite` returns a module (with replace_chain), then recompiles (lints) gm. Returns the
/// number of chains replaced.
size_t replace_pattern(GraphModule& gm, const Pattern& pattern, const ChainRewrite& rewrite);

}  // namespace qflow::fx
