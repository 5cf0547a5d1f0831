// The derivative registry, saved tensors and BackwardContext accessors.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "qflow/autograd/derivatives.h"
#include "saved_tensor.h"

namespace qflow::autograd {

SavedTensor::SavedTensor(const Tensor& t, bool output) : is_output(output) {
  if (!t.defined()) return;
  // A detached alias: same storage and version counter (and opaque layout), no autograd meta.
  data = Tensor(t.impl()->alias());
  version = t.version();
}

const Tensor& SavedTensor::unpack(const std::string& node_name) const {
  QFLOW_CHECK(!released,
              "{}: trying to backward through the graph a second time (saved tensors were freed); pass "
              "retain_graph=true to the first backward if you need to",
              node_name);
  if (data.defined()) {
    QFLOW_CHECK(data.version() == version,
                "{}: one of the tensors needed for gradient computation has been modified by an in-place operation: "
                "the {} of shape {} is at version {}; expected version {} instead",
                node_name, is_output ? "output" : "input", data.sizes(), data.version(), version);
  }
  return data;
}

namespace detail {

namespace {
std::string argument_names(const OpSchema& schema) {
  std::vector<std::string_view> names;
  for (const ArgSpec& a : schema.args) names.push_back(a.name);
  return fmt::format("{}", fmt::join(names, ", "));
}
bool is_tensor_type(ArgType t) { return t == ArgType::Tensor || t == ArgType::TensorList; }
}  // namespace

void RuleSignature::resolve(const OpSchema& schema, const SaveInputs& save) {
  std::vector<ArgSlot> slots;
  size_t flat = 0;
  bool after_list = false;
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const ArgSpec& spec = schema.args[i];
    ArgSlot s{.name = spec.name, .index = i, .type = spec.type, .flat = std::nullopt,
              .saved = save.all && is_tensor_type(spec.type)};
    if (spec.type == ArgType::Tensor && !after_list) s.flat = flat++;
    if (spec.type == ArgType::TensorList) after_list = true;
    slots.push_back(s);
  }
  for (size_t k = 0; k < save.count; ++k) {
    const std::string_view name = save.names[k];
    auto it = std::find_if(slots.begin(), slots.end(), [&](const ArgSlot& s) { return s.name == name; });
    QFLOW_CHECK(it != slots.end() && is_tensor_type(it->type),
                "derivative of '{}': save_inputs names '{}', which is not a tensor argument of {} (arguments: {})",
                schema.full_name(), name, schema.to_string(), argument_names(schema));
    it->saved = true;
  }
  slots_ = std::move(slots);
  has_tensor_list_ = after_list;
  schema_ = &schema;
}

const ArgSlot& RuleSignature::slot(std::string_view name) const {
  for (const ArgSlot& s : slots_)
    if (s.name == name) return s;
  QFLOW_CHECK(false, "derivative of '{}': no argument named '{}' in its schema {} (arguments: {})", schema_->full_name(),
              name, schema_->to_string(), argument_names(*schema_));
  std::abort();  // unreachable: QFLOW_CHECK(false) throws
}

}  // namespace detail

const detail::RuleSignature& DerivativeRule::resolved() const {
  QFLOW_ASSERT(signature != nullptr, "derivative rule of '{}' was not registered through DerivativeRegistry::def", op);
  // A failed resolution throws out of call_once, which then stays unset: the next use throws again.
  std::call_once(signature->once, [&] { signature->resolve(OpRegistry::instance().get(op).schema, save_inputs); });
  return *signature;
}

size_t BackwardContext::flat_index(std::string_view name) const {
  const detail::ArgSlot& s = signature_->slot(name);
  QFLOW_CHECK(s.type == ArgType::Tensor, "{}: argument '{}' of {} is a {}, not a Tensor{}", op_, name,
              signature_->schema().full_name(), arg_type_name(s.type),
              s.type == ArgType::TensorList ? " (read Tensor[] arguments with list_size and the (name, k) accessors)"
                                            : " (read it with arg())");
  return s.flat ? *s.flat : first_input_.at(s.index);
}

size_t BackwardContext::list_size(std::string_view name) const {
  const detail::ArgSlot& s = signature_->slot(name);
  QFLOW_CHECK(s.type == ArgType::TensorList, "{}: argument '{}' of {} is a {}, not a Tensor[]", op_, name,
              signature_->schema().full_name(), arg_type_name(s.type));
  return first_input_.at(s.index + 1) - first_input_.at(s.index);
}

size_t BackwardContext::list_index(std::string_view name, size_t k) const {
  const size_t n = list_size(name);
  QFLOW_CHECK(k < n, "{}: tensor {} of argument '{}', which holds {}", op_, k, name, n);
  return first_input_.at(signature_->slot(name).index) + k;
}

const Value& BackwardContext::arg(std::string_view name) const {
  const detail::ArgSlot& s = signature_->slot(name);
  QFLOW_CHECK(s.type != ArgType::Tensor && s.type != ArgType::TensorList,
              "{}: argument '{}' of {} is a tensor; read it with input() (and save it in save_inputs)", op_, name,
              signature_->schema().full_name());
  return args_.at(s.index);
}

const Tensor& BackwardContext::input(std::string_view name) const {
  const size_t i = flat_index(name);
  QFLOW_CHECK(has_input_at(i) || !signature_->slot(name).saved,
              "{}: input '{}' is None (check has_input, or use input_or_none)", op_, name);
  QFLOW_CHECK(has_input_at(i), "{}: input '{}' was not saved by its derivative rule (add it to save_inputs)", op_, name);
  return input_at(i);
}

Tensor BackwardContext::input_or_none(std::string_view name) const {
  const size_t i = flat_index(name);
  return has_input_at(i) ? input_at(i) : Tensor();
}

const Tensor& BackwardContext::input_at(size_t i) const {
  if (!unpacked_inputs_[i].defined()) unpacked_inputs_[i] = saved_inputs_[i]->unpack(op_);
  return unpacked_inputs_[i];
}

const Tensor& BackwardContext::output(size_t i) const {
  QFLOW_ASSERT(i < saved_outputs_.size() && saved_outputs_[i], "{}: output {} was not saved by its derivative rule", op_, i);
  if (!unpacked_outputs_[i].defined()) unpacked_outputs_[i] = saved_outputs_[i]->unpack(op_);
  return unpacked_outputs_[i];
}

TensorList BackwardContext::gradients(std::initializer_list<std::pair<std::string_view, Tensor>> by_name) const {
  TensorList out(input_meta_.size());
  for (const auto& [name, grad] : by_name) out[flat_index(name)] = grad;
  return out;
}

DerivativeRegistry& DerivativeRegistry::instance() {
  static DerivativeRegistry r;
  return r;
}

void DerivativeRegistry::def(std::string_view full_name, DerivativeRule rule) {
  QFLOW_CHECK(!rules_.count(std::string(full_name)), "derivative of '{}' is registered or declared twice", full_name);
  QFLOW_CHECK(!rule.differentiable() || rule.backward != nullptr, "derivative of '{}' has no backward function",
              full_name);
  QFLOW_CHECK(rule.differentiable() || !rule.reason.empty(), "op '{}' is declared without a derivative but no reason",
              full_name);
  rule.op = std::string(full_name);
  rule.signature = std::make_shared<detail::RuleSignature>();
  rules_.emplace(std::string(full_name), std::move(rule));
}

void DerivativeRegistry::declare(std::initializer_list<std::string_view> names, Differentiability kind,
                                 std::string_view reason) {
  for (auto n : names)
    def(n, DerivativeRule{.node_name = std::string(n), .kind = kind, .reason = std::string(reason)});
}

void DerivativeRegistry::non_differentiable(std::initializer_list<std::string_view> names, std::string_view reason) {
  declare(names, Differentiability::NonDifferentiable, reason);
}

void DerivativeRegistry::no_derivative(std::initializer_list<std::string_view> names, std::string_view reason) {
  declare(names, Differentiability::NoDerivative, reason);
}

const DerivativeRule* DerivativeRegistry::find(std::string_view full_name) const {
  auto it = rules_.find(std::string(full_name));
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<const DerivativeRule*> DerivativeRegistry::all() const {
  std::vector<const DerivativeRule*> out;
  for (const auto& [name, rule] : rules_) out.push_back(&rule);
  return out;
}

}  // namespace qflow::autograd
