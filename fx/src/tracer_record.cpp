// The tracing dispatch layer and how one op call becomes a call_function node.
// See Note [Proxy tensors].
#include <optional>

#include "tracer.h"

namespace qflow::fx::detail {

namespace {

bool is_sym_op(const OpDef& op) {
  static const std::string_view kOps[] = {"sym_size", "sym_add", "sym_sub", "sym_mul", "sym_div", "sym_mod"};
  for (std::string_view s : kOps)
    if (op.name == s) return true;
  return false;
}

// A value as an argument when it holds no tensor and no symbolic size (for default checks).
std::optional<Argument> constant_argument(const Value& v) {
  if (v.is_none()) return Argument();
  if (v.is_tensor() || v.is_tensor_list()) return std::nullopt;
  if (v.is_int()) return v.sym_int().is_symbolic() ? std::nullopt : std::optional<Argument>(v.sym_int().hint());
  if (v.is_int_list()) {
    if (any_symbolic(v.sym_int_list())) return std::nullopt;
    return Argument(hints(v.sym_int_list()));
  }
  if (v.is_scalar()) {
    const Scalar s = v.scalar();
    if (s.kind() == Scalar::Kind::Bool) return Argument(s.to_bool());
    if (s.kind() == Scalar::Kind::Int) return Argument(s.to_int());
    return Argument(s.to_double());
  }
  if (v.is_bool()) return Argument(v.to_bool());
  if (v.is_double()) return Argument(v.to_double());
  if (v.is_string()) return Argument(v.string());
  return Argument(v.dtype());
}

bool equals_default(const ArgSpec& spec, const Value& v) {
  if (!spec.default_value) return false;
  const auto a = constant_argument(v), d = constant_argument(*spec.default_value);
  return a && d && *a == *d;
}

Value shadow_value(const Value& v) {
  if (v.is_tensor()) return Value(shadow_of(v.tensor()));
  if (v.is_tensor_list()) {
    TensorList l;
    for (const Tensor& t : v.tensor_list()) l.push_back(shadow_of(t));
    return Value(std::move(l));
  }
  if (v.is_int()) return Value(v.sym_int().hint());
  if (v.is_int_list()) return Value(hints(v.sym_int_list()));
  return v;
}

[[noreturn]] void fail_data_dependent(const OpDef& op, const ArgSpec& ret) {
  QFLOW_TRACE_FAIL("symbolic_trace: '{}' returns a {} computed from the values of a traced tensor, and traced tensors have "
                   "no values: data-dependent control flow (e.g. `if (x.sum().item<float>() > 0)`) cannot be traced. "
                   "Move that code out of forward, or make the module containing it a leaf (TraceOptions::is_leaf)",
                   op.name, arg_type_name(ret.type));
}

}  // namespace

void Tracer::build_arguments(const OpDef& op, const Stack& args, Arguments& out, Kwargs& kwargs) {
  const auto& specs = op.schema.args;
  QFLOW_ASSERT(args.size() <= specs.size(), "{} called with {} arguments for {} in its schema", op.name, args.size(), specs.size());
  // Positional arguments up to the last one that differs from its default (the rest are
  // filled in again when the node runs); keyword-only ones only when not the default.
  size_t keep = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if (!specs[i].keyword_only && !equals_default(specs[i], args[i])) keep = i + 1;
  for (size_t i = 0; i < keep; ++i)
    if (!specs[i].keyword_only) out.push_back(to_argument(args[i], op.name));
  for (size_t i = 0; i < args.size(); ++i)
    if (specs[i].keyword_only && !equals_default(specs[i], args[i])) kwargs.emplace_back(specs[i].name, to_argument(args[i], op.name));
}

Node* Tracer::getitem(Node* source, int64_t index, const TensorMeta& meta) {
  Node* g = graph_.call_function("getitem", {source, index});
  g->meta().outputs = {meta};
  return g;
}

Stack Tracer::make_outputs(const OpDef& op, Node* node, const std::vector<TensorMeta>& metas, const Stack& args) {
  const auto& rets = op.schema.returns;
  if (auto m = op.schema.mutated_arg()) {
    // The typed in-place wrappers return their `self` handle: make that handle's node the
    // write, so later uses depend on it.
    const Tensor& self = args[*m].tensor();
    if (ProxyExtension* ext = own_proxy(self, op.name)) ext->rebind(node);
    return Stack{Value(self)};
  }
  if (rets.size() == 1 && rets[0].type == ArgType::Tensor) {
    QFLOW_CHECK(metas.size() == 1, "symbolic_trace: the shape rule of '{}' gave {} outputs for one tensor", op.name, metas.size());
    return Stack{Value(make_proxy(node, metas[0]))};
  }
  if (rets.size() == 1 && rets[0].type == ArgType::TensorList) {
    TensorList list;
    for (size_t i = 0; i < metas.size(); ++i) list.push_back(make_proxy(getitem(node, static_cast<int64_t>(i), metas[i]), metas[i]));
    return Stack{Value(std::move(list))};
  }
  QFLOW_CHECK(metas.size() == rets.size(), "symbolic_trace: the shape rule of '{}' gave {} outputs for {} returns", op.name,
              metas.size(), rets.size());
  Stack out;
  for (size_t i = 0; i < metas.size(); ++i) out.push_back(Value(make_proxy(getitem(node, static_cast<int64_t>(i), metas[i]), metas[i])));
  return out;
}

Stack Tracer::record_op(const OpDef& op, Stack& args) {
  // Size ops only read metadata; their kernels record symbolic arithmetic themselves.
  if (is_sym_op(op)) return Dispatcher::redispatch(op, args, DispatchKeySet());
  for (const ArgSpec& ret : op.schema.returns)
    if (ret.type != ArgType::Tensor && ret.type != ArgType::TensorList) fail_data_dependent(op, ret);
  if (auto m = op.schema.mutated_arg()) {
    const Tensor& self = args.at(*m).tensor();
    if (!own_proxy(self, op.name) && !context_.attributes.count(self.impl())) {
      QFLOW_TRACE_FAIL("symbolic_trace: '{}' writes into a tensor created while tracing; it would become a constant of the "
                       "graph, modified on every run. Create it from the inputs (e.g. zeros_like(x)) or register it as a "
                       "buffer", op.name);
    }
  }
  Arguments node_args;
  Kwargs kwargs;
  build_arguments(op, args, node_args, kwargs);
  Stack shadow;
  shadow.reserve(args.size());
  for (const Value& v : args) shadow.push_back(shadow_value(v));
  const std::vector<TensorMeta> metas = op.infer_shapes(shadow);
  Node* node = graph_.call_function(op.name, std::move(node_args), std::move(kwargs));
  node->meta().outputs = metas;
  if (grad_mode_dropped()) node->meta().set("no_grad", 1.0);
  return make_outputs(op, node, metas, args);
}

namespace {

class TracingLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "fx_trace"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    Tracer* tracer = current_tracer();
    // Outside a trace, marked tensors pass through; a stale proxy then fails at the kernel
    // ("a traced proxy has no values").
    if (tracer == nullptr) return Dispatcher::redispatch(op, args, remaining);
    return tracer->record_op(op, args);
  }
};

struct RegisterTracingLayer {
  RegisterTracingLayer() { Dispatcher::register_layer(kTraceKey, std::make_shared<TracingLayer>()); }
} g_register_tracing_layer;

}  // namespace

}  // namespace qflow::fx::detail
