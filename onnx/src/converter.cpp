#include "converter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "qflow/core/error.h"
#include "qflow/core/op_registry.h"

namespace qflow::onnx::detail {

void fail(const fx::Node& node, const std::string& message) {
  std::string from;
  // Nodes that inline_modules copied out of a module's forward name that module too.
  if (const fx::MetaValue* m = node.meta().find("onnx.inlined_from"))
    from = fmt::format(", from module call_module[target={}]", std::get<std::string>(*m));
  QFLOW_CHECK(false, "onnx export: node %{} ({}[target={}]{}): {}", node.name(), fx::op_name(node.op()),
              node.target(), from, message);
  std::abort();  // unreachable: QFLOW_CHECK(false) throws
}

void ExportContext::bind(const fx::Node& node, std::vector<std::string> values) {
  QFLOW_ASSERT(values_.emplace(&node, std::move(values)).second, "onnx export: node %{} converted twice", node.name());
}

std::string ExportContext::value(const fx::Node& node, const fx::Node& user, size_t index) {
  auto it = values_.find(&node);
  if (it == values_.end() && node.op() == fx::NodeOp::GetAttr) {
    bind(node, {builder.initializer(node.target(), gm.get_attr(node.target()))});
    it = values_.find(&node);
  }
  if (it == values_.end()) {
    if (node.op() == fx::NodeOp::CallFunction && node.target().rfind("sym_", 0) == 0)
      fail(user, fmt::format("reads the symbolic size %{} as a tensor; ONNX export supports symbolic sizes only as "
                             "view/reshape dimensions",
                             node.name()));
    fail(user, fmt::format("its input %{} has no ONNX value", node.name()));
  }
  QFLOW_ONNX_CHECK(index < it->second.size() && !it->second[index].empty(), user,
                   "output {} of %{} has no ONNX value", index, node.name());
  return it->second[index];
}

std::string ExportContext::tensor_arg(const fx::Node& user, const fx::Argument& arg, std::string_view what) {
  QFLOW_ONNX_CHECK(arg.is_node(), user, "argument '{}' must be a tensor, got {}", what, fx::format_argument(arg));
  return value(*arg.node(), user);
}

std::string ExportContext::out_name(const fx::Node& node) const {
  if (const auto it = results_.find(&node); it != results_.end()) return it->second;
  // The graph's input and output names belong to them alone; an inner node that happens to
  // be named alike (an fx node called "output", say) gets a suffix.
  if (reserved_.count(node.name())) return node.name() + "__";
  return node.name();
}

void ExportContext::emit(const fx::Node& node, std::string_view op_type, const std::vector<std::string>& inputs,
                         const std::vector<Attr>& attrs) {
  const std::string out = out_name(node);
  builder.node(op_type, inputs, {out}, attrs);
  bind(node, {out});
}

void ExportContext::alias(const fx::Node& node, const fx::Argument& source) {
  bind(node, {tensor_arg(node, source, "self")});
}

const std::vector<int64_t>& ExportContext::shape(const fx::Node& node) const {
  if (!node.meta().has_shape()) fail(node, "its shape is unknown (ShapeProp recorded none)");
  return node.meta().shape();
}

DType ExportContext::dtype(const fx::Node& node) const {
  if (!node.meta().has_shape()) fail(node, "its dtype is unknown (ShapeProp recorded none)");
  return node.meta().dtype();
}

namespace {
fx::Argument to_argument(const Value& v) {
  if (v.is_none()) return fx::Argument();
  if (v.is_int()) return fx::Argument(v.sym_int().expect_int("a schema default"));
  if (v.is_int_list()) return fx::Argument(v.int_list());
  if (v.is_bool()) return fx::Argument(v.to_bool());
  if (v.is_double()) return fx::Argument(v.to_double());
  if (v.is_string()) return fx::Argument(v.string());
  if (v.is_dtype()) return fx::Argument(v.dtype());
  if (v.is_scalar()) {
    const Scalar s = v.scalar();
    if (s.is_floating()) return fx::Argument(s.to_double());
    if (s.kind() == Scalar::Kind::Bool) return fx::Argument(s.to_int() != 0);
    return fx::Argument(s.to_int());
  }
  QFLOW_ASSERT(false, "onnx export: unexpected schema default of kind {}", v.kind_name());
  return fx::Argument();
}
}  // namespace

namespace {
std::string argument_names(const OpSchema& schema) {
  std::vector<std::string_view> names;
  for (const ArgSpec& a : schema.args) names.push_back(a.name);
  return fmt::format("{}", fmt::join(names, ", "));
}
}  // namespace

NodeArgs::NodeArgs(const fx::Node& node) : node_(&node) {
  const OpDef* def = OpRegistry::instance().find(node.target());
  if (!def) fail(node, fmt::format("'{}' is not a registered op", node.target()));
  schema_ = &def->schema;
  const auto& specs = schema_->args;
  QFLOW_ONNX_CHECK(node.args().size() <= specs.size(), node, "{} arguments for the {} of schema {}", node.args().size(),
                   specs.size(), schema_->to_string());
  // Tracing leaves out trailing arguments equal to their defaults.
  args_.assign(node.args().begin(), node.args().end());
  for (size_t i = args_.size(); i < specs.size(); ++i) {
    const auto kw = std::find_if(node.kwargs().begin(), node.kwargs().end(),
                                 [&](const auto& p) { return p.first == specs[i].name; });
    if (kw != node.kwargs().end()) {
      args_.push_back(kw->second);
    } else {
      QFLOW_ONNX_CHECK(specs[i].default_value.has_value(), node, "argument '{}' of schema {} is missing",
                       specs[i].name, schema_->to_string());
      args_.push_back(to_argument(*specs[i].default_value));
    }
  }
}

const fx::Argument& NodeArgs::operator[](std::string_view name) const {
  const auto i = schema_->arg_index(name);
  if (!i)
    fail(*node_, fmt::format("the converter reads argument '{}', which schema {} does not have (arguments: {})", name,
                             schema_->to_string(), argument_names(*schema_)));
  return args_[*i];
}

const fx::Node& NodeArgs::producer(std::string_view name) const {
  const fx::Argument& arg = (*this)[name];
  QFLOW_ONNX_CHECK(arg.is_node(), *node_, "argument '{}' must be a tensor, got {}", name, fx::format_argument(arg));
  return *arg.node();
}

std::string ExportContext::input(const NodeArgs& a, std::string_view name) {
  return tensor_arg(a.node(), a[name], name);
}

double scalar_arg(const NodeArgs& a, std::string_view name) {
  const fx::Argument& v = a[name];
  QFLOW_ONNX_CHECK(v.is_int() || v.is_double() || v.is_bool(), a.node(), "argument '{}' must be a number, got {}", name,
                   fx::format_argument(v));
  return v.is_bool() ? (v.to_bool() ? 1.0 : 0.0) : v.to_double();
}

std::vector<int64_t> pair_arg(const NodeArgs& a, std::string_view name, const std::vector<int64_t>& fallback) {
  const fx::Node& node = a.node();
  const fx::Argument& arg = a[name];
  std::vector<int64_t> v;
  if (arg.is_int()) {
    v = {arg.to_int()};
  } else {
    QFLOW_ONNX_CHECK(arg.is_int_list(), node, "argument '{}' must be int[2], got {}", name, fx::format_argument(arg));
    for (const fx::IntOrNode& e : arg.int_list()) {
      QFLOW_ONNX_CHECK(std::holds_alternative<int64_t>(e), node, "argument '{}' must be constant, got {}", name,
                       fx::format_argument(arg));
      v.push_back(std::get<int64_t>(e));
    }
  }
  if (v.empty()) v = fallback;
  if (v.size() == 1) v.push_back(v[0]);
  QFLOW_ONNX_CHECK(v.size() == 2, node, "argument '{}' must hold 1 or 2 values, got {}", name, fx::format_argument(arg));
  return v;
}

namespace {

// Both tables come from the op declarations' `onnx` and `no_onnx` (gen-ops writes
// add_*_declared into float_ops.cpp and quant_ops.cpp; Note [One declaration per op]).
struct DeclaredTables {
  std::map<std::string, FunctionConverter> converters;
  std::map<std::string, std::string> refusals;
};

const DeclaredTables& declared_tables() {
  static const auto tables = [] {
    DeclaredTables t;
    add_float_ops_declared(t.converters, t.refusals);
    add_quant_ops_declared(t.converters, t.refusals);
    return t;
  }();
  return tables;
}

}  // namespace

const std::map<std::string, FunctionConverter>& function_converters() { return declared_tables().converters; }

const std::map<std::string, std::string>& refused_functions() { return declared_tables().refusals; }

const std::unordered_map<std::type_index, ModuleConverter>& module_converters() {
  static const auto table = [] {
    std::unordered_map<std::type_index, ModuleConverter> t;
    add_float_module_converters(t);
    add_quant_module_converters(t);
    return t;
  }();
  return table;
}

}  // namespace qflow::onnx::detail
