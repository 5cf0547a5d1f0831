// Proxies, symbolic sizes and how traced values become node arguments.
// See Note [Proxy tensors] and Note [Symbolic sizes in fx].
#include <atomic>

#include "qflow/autograd/grad_mode.h"
#include "tracer.h"

namespace qflow::fx::detail {

namespace {

thread_local Tracer* t_current = nullptr;

uint64_t next_tracer_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

// The tracer a proxy or symbolic size belongs to, when it is the one recording now.
Tracer* live_tracer(uint64_t id) {
  Tracer* t = t_current;
  return t != nullptr && t->id() == id ? t : nullptr;
}

const char* sym_op_name(char op) {
  switch (op) {
    case '+': return "sym_add";
    case '-': return "sym_sub";
    case '*': return "sym_mul";
    case '/': return "sym_div";
    default: return "sym_mod";
  }
}

}  // namespace

Tracer* current_tracer() { return t_current; }

ActiveTracerGuard::ActiveTracerGuard(Tracer* tracer) : previous_(t_current), hook_(tracer) { t_current = tracer; }
ActiveTracerGuard::~ActiveTracerGuard() { t_current = previous_; }

TensorMeta meta_of(const Tensor& t) { return TensorMeta{t.sizes(), t.dtype()}; }

Tensor shadow_of(const Tensor& t) {
  if (!t.defined()) return t;
  return Tensor(std::make_shared<TensorImpl>(nullptr, t.sizes(), t.strides(), t.storage_offset(), t.dtype()));
}

// ---- symbolic sizes --------------------------------------------------------------------------

SymInt ProxyExtension::sym_size(int64_t dim, int64_t concrete) const {
  Tracer* t = live_tracer(tracer_id_);
  if (t == nullptr) {
    // A proxy read after its trace ended is inert: its sizes are the ones seen while tracing.
    // Inside another trace it must not leak in as a constant.
    if (t_current != nullptr) {
      QFLOW_TRACE_FAIL("symbolic_trace: size({}) of a proxy tensor of another trace; proxies are only valid inside their "
                       "own trace", dim);
    }
    return SymInt(concrete);
  }
  auto it = sizes_.find(dim);
  if (it != sizes_.end()) return it->second;
  Node* n = t->graph().call_function("sym_size", {node_, dim});
  SymInt s(std::make_shared<FxSymNode>(tracer_id_, n, concrete));
  sizes_.emplace(dim, s);
  return s;
}

void ProxyExtension::rebind(Node* node) {
  node_ = node;
  sizes_.clear();  // new size reads should name the new producer
}

int64_t FxSymNode::guard_int(const char* why) const {
  Tracer* t = live_tracer(tracer_id_);
  if (t != nullptr && t->scratch()) return hint_;  // a leaf's sizes: specialising is harmless
  const std::string what = t != nullptr ? fmt::format("%{} is a traced size ({} in this trace)", node_->name(), hint_)
                                        : fmt::format("a traced size ({} in its trace) outlived its trace and", hint_);
  QFLOW_TRACE_FAIL(
      "symbolic_trace: {}: {}; the graph must work for any value of it, so it cannot become a C++ integer. "
      "Data-dependent control flow (an `if` or loop on a traced size or value) cannot be traced. Pass sizes straight to "
      "ops that take symbolic sizes (view, reshape, expand), or make the code a leaf module (TraceOptions::is_leaf)",
      why, what);
}

SymInt FxSymNode::binary(char op, const SymInt& lhs, const SymInt& rhs) const {
  Tracer* t = live_tracer(tracer_id_);
  if (t == nullptr) {
    QFLOW_TRACE_FAIL("symbolic_trace: arithmetic on a traced size outside of its trace (a size kept from a finished or "
                     "enclosing trace)");
  }
  const std::string_view what = sym_op_name(op);
  Argument a = t->sym_argument(lhs, what), b = t->sym_argument(rhs, what);
  const int64_t hint = sym_binary(op, SymInt(lhs.hint()), SymInt(rhs.hint())).hint();
  Node* n = t->graph().call_function(sym_op_name(op), {std::move(a), std::move(b)});
  return SymInt(std::make_shared<FxSymNode>(tracer_id_, n, hint));
}

// ---- the tracer --------------------------------------------------------------------------------

Tracer::Tracer(Graph& graph, const TraceContext& context, bool scratch)
    : graph_(graph), context_(context), scratch_(scratch), id_(next_tracer_id()),
      grad_enabled_at_start_(autograd::GradMode::is_enabled()) {}

Tensor Tracer::make_proxy(Node* node, const TensorMeta& meta) {
  auto impl = std::make_shared<TensorImpl>(nullptr, meta.sizes, contiguous_strides(meta.sizes), 0, meta.dtype);
  impl->add_key(kTraceKey);
  impl->set_extension(std::make_shared<ProxyExtension>(id_, node));
  return Tensor(std::move(impl));
}

Tensor Tracer::placeholder(const std::string& name, const TensorMeta& meta) {
  Node* n = graph_.placeholder(name);
  n->meta().outputs = {meta};
  return make_proxy(n, meta);
}

void Tracer::output(const TensorList& outputs) {
  std::vector<TensorMeta> metas;
  auto node_or_none = [&](const Tensor& t) -> Argument {
    if (!t.defined()) return Argument();
    metas.push_back(meta_of(t));
    return node_of(t, "output");
  };
  Node* out;
  if (outputs.size() == 1) {
    out = graph_.output(node_or_none(outputs[0]));
  } else {
    NodeList nodes;
    for (const Tensor& t : outputs) {
      QFLOW_CHECK(t.defined(), "symbolic_trace: forward returned an undefined tensor among {} outputs", outputs.size());
      nodes.push_back(node_or_none(t).node());
    }
    out = graph_.output(std::move(nodes));
  }
  out->meta().outputs = std::move(metas);
}

ProxyExtension* Tracer::own_proxy(const Tensor& t, std::string_view op) const {
  auto* ext = dynamic_cast<ProxyExtension*>(t.impl()->extension());
  if (ext == nullptr) return nullptr;
  if (ext->tracer_id() != id_) {
    QFLOW_TRACE_FAIL("symbolic_trace: {}: got a proxy tensor of another trace (kept from an earlier or enclosing trace); "
                     "proxies are only valid inside their own trace", op);
  }
  return ext;
}

Node* Tracer::attribute_node(const std::string& path) {
  auto it = attribute_nodes_.find(path);
  if (it != attribute_nodes_.end()) return it->second;
  Node* n = graph_.get_attr(path);
  attribute_nodes_.emplace(path, n);
  return n;
}

Node* Tracer::node_of(const Tensor& t, std::string_view op) {
  QFLOW_CHECK(t.defined(), "symbolic_trace: {}: got an undefined tensor where a tensor is required", op);
  if (ProxyExtension* ext = own_proxy(t, op)) return ext->node();
  if (auto it = context_.attributes.find(t.impl()); it != context_.attributes.end()) {
    Node* n = attribute_node(it->second);
    n->meta().outputs = {meta_of(t)};
    return n;
  }
  // Any other tensor was made while tracing (or captured): a constant of the graph.
  if (auto it = constant_nodes_.find(t.impl()); it != constant_nodes_.end()) return it->second;
  const std::string name = fmt::format("_tensor_constant{}", constants_.size());
  constants_.emplace(name, t);
  Node* n = graph_.get_attr(name);
  n->meta().outputs = {meta_of(t)};
  constant_nodes_.emplace(t.impl(), n);
  return n;
}

Argument Tracer::sym_argument(const SymInt& s, std::string_view op) const {
  if (!s.is_symbolic()) return Argument(s.hint());
  const auto* node = dynamic_cast<const FxSymNode*>(s.node().get());
  if (node == nullptr || node->tracer_id() != id_) {
    QFLOW_TRACE_FAIL("symbolic_trace: {}: got a symbolic size of another trace; traced sizes are only valid inside "
                     "their own trace", op);
  }
  return Argument(node->node());
}

Argument Tracer::to_argument(const Value& v, std::string_view op) {
  if (v.is_none()) return Argument();
  if (v.is_tensor()) return v.tensor().defined() ? Argument(node_of(v.tensor(), op)) : Argument();
  if (v.is_tensor_list()) {
    NodeList nodes;
    for (const Tensor& t : v.tensor_list()) nodes.push_back(node_of(t, op));
    return Argument(std::move(nodes));
  }
  if (v.is_int()) return sym_argument(v.sym_int(), op);
  if (v.is_int_list()) {
    IntListArg list;
    for (const SymInt& s : v.sym_int_list()) {
      Argument a = sym_argument(s, op);
      if (a.is_node()) list.emplace_back(a.node());
      else list.emplace_back(a.to_int());
    }
    return Argument(std::move(list));
  }
  if (v.is_scalar()) {
    const Scalar s = v.scalar();
    switch (s.kind()) {
      case Scalar::Kind::Bool: return Argument(s.to_bool());
      case Scalar::Kind::Int: return Argument(s.to_int());
      case Scalar::Kind::Float: return Argument(s.to_double());
    }
  }
  if (v.is_bool()) return Argument(v.to_bool());
  if (v.is_double()) return Argument(v.to_double());
  if (v.is_string()) return Argument(v.string());
  return Argument(v.dtype());
}

bool Tracer::grad_mode_dropped() const { return grad_enabled_at_start_ && !autograd::GradMode::is_enabled(); }

}  // namespace qflow::fx::detail
