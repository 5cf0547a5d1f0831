#pragma once
// The tracer behind symbolic_trace (internal). See Note [Proxy tensors], Note [Symbolic sizes
// in fx] and Note [Leaf modules] in qflow/fx/trace.h.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qflow/core/dispatch.h"
#include "qflow/fx/graph.h"
#include "qflow/fx/trace.h"
#include "qflow/nn/module.h"

namespace qflow::fx::detail {

class Tracer;

/// What a proxy carries: the tracer it belongs to (by id, so a proxy that outlives its trace
/// is recognised without touching freed memory) and the node producing it.
class ProxyExtension final : public TensorExtension {
 public:
  ProxyExtension(uint64_t tracer_id, Node* node) : tracer_id_(tracer_id), node_(node) {}
  SymInt sym_size(int64_t dim, int64_t concrete) const override;

  uint64_t tracer_id() const { return tracer_id_; }
  Node* node() const { return node_; }
  /// An in-place op made `node` the producer of this tensor's value.
  void rebind(Node* node);

 private:
  uint64_t tracer_id_;
  Node* node_;
  mutable std::map<int64_t, SymInt> sizes_;  // one sym_size node per dimension read
};

/// A symbolic size: the node computing it and its value while tracing.
class FxSymNode final : public SymNode {
 public:
  FxSymNode(uint64_t tracer_id, Node* node, int64_t hint) : tracer_id_(tracer_id), node_(node), hint_(hint) {}
  int64_t hint() const override { return hint_; }
  int64_t guard_int(const char* why) const override;
  SymInt binary(char op, const SymInt& lhs, const SymInt& rhs) const override;

  uint64_t tracer_id() const { return tracer_id_; }
  Node* node() const { return node_; }

 private:
  uint64_t tracer_id_;
  Node* node_;
  int64_t hint_;
};

/// What a trace and the scratch traces of its leaves share.
struct TraceContext {
  std::unordered_map<const TensorImpl*, std::string> attributes;  // root parameters/buffers → path
  std::unordered_map<const nn::Module*, std::string> module_paths;
  LeafPredicate is_leaf;
};

class Tracer final : public nn::ModuleCallHook {
 public:
  /// A scratch tracer records a leaf's forward only to learn its output sizes: it traces
  /// through every module and lets guards specialise (the graph is thrown away).
  Tracer(Graph& graph, const TraceContext& context, bool scratch);

  uint64_t id() const { return id_; }
  Graph& graph() { return graph_; }
  bool scratch() const { return scratch_; }

  /// A new proxy produced by `node`.
  Tensor make_proxy(Node* node, const TensorMeta& meta);
  /// A placeholder node and its proxy.
  Tensor placeholder(const std::string& name, const TensorMeta& meta);
  /// Records the output node for forward's results.
  void output(const TensorList& outputs);
  /// The constants created so far (tensors that are neither proxies nor attributes).
  std::map<std::string, Tensor> take_constants() { return std::move(constants_); }

  /// The dispatch layer's work: record `op` (see Note [Proxy tensors]).
  Stack record_op(const OpDef& op, Stack& args);
  /// The module call hook: leaves become call_module, the rest is traced through.
  TensorList call(nn::Module& module, const TensorList& inputs, const Forward& run_forward) override;

  /// The node standing for tensor `t` (proxy node, get_attr for an attribute, constant).
  Node* node_of(const Tensor& t, std::string_view op);
  /// The proxy extension of `t` when it is a proxy of this tracer; throws for another trace's proxy.
  ProxyExtension* own_proxy(const Tensor& t, std::string_view op) const;
  /// A size argument: its node when symbolic (of this trace), else the integer.
  Argument sym_argument(const SymInt& s, std::string_view op) const;

 private:
  Argument to_argument(const Value& v, std::string_view op);
  /// True when forward turned grad mode off (a NoGradGuard) since the trace started: nodes
  /// recorded then get meta "no_grad" so the Interpreter runs them the same way.
  bool grad_mode_dropped() const;
  void build_arguments(const OpDef& op, const Stack& args, Arguments& out, Kwargs& kwargs);
  Stack make_outputs(const OpDef& op, Node* node, const std::vector<TensorMeta>& metas, const Stack& args);
  TensorList record_leaf(nn::Module& module, const std::string& path, const TensorList& inputs, const Forward& run_forward);
  /// Output sizes of a leaf call; see Note [Leaf modules].
  std::vector<TensorMeta> leaf_output_metas(nn::Module& module, const std::string& path, const TensorList& inputs,
                                            const Forward& run_forward);
  Node* attribute_node(const std::string& path);
  Node* getitem(Node* source, int64_t index, const TensorMeta& meta);

  Graph& graph_;
  const TraceContext& context_;
  bool scratch_;
  uint64_t id_;
  bool grad_enabled_at_start_;
  std::unordered_map<std::string, Node*> attribute_nodes_;
  std::unordered_map<const TensorImpl*, Node*> constant_nodes_;
  std::map<std::string, Tensor> constants_;
};

/// The tracer recording on this thread, or null.
Tracer* current_tracer();

/// Makes `tracer` the current tracer and module call hook of this thread for its lifetime.
class ActiveTracerGuard {
 public:
  explicit ActiveTracerGuard(Tracer* tracer);
  ~ActiveTracerGuard();
  ActiveTracerGuard(const ActiveTracerGuard&) = delete;
  ActiveTracerGuard& operator=(const ActiveTracerGuard&) = delete;

 private:
  Tracer* previous_;
  nn::ModuleCallHookGuard hook_;
};

/// Shape and dtype of a tensor.
TensorMeta meta_of(const Tensor& t);
/// A tensor with `t`'s sizes, strides and dtype, no storage, no keys, no extension: what
/// shape rules see instead of proxies, so they cannot touch data or symbolic sizes.
Tensor shadow_of(const Tensor& t);

}  // namespace qflow::fx::detail
