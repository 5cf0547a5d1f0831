#include "qflow/core/op_args.h"

#include <fmt/format.h>

#include "qflow/core/error.h"

namespace qflow {

namespace {

std::string names_of(const OpSchema& schema) {
  std::string names;
  for (const ArgSpec& a : schema.args) names += (names.empty() ? "" : ", ") + a.name;
  return names;
}

}  // namespace

Stack named_stack(const OpSchema& schema, NamedArgs args) {
  Stack stack(schema.args.size());
  std::vector<bool> given(schema.args.size(), false);
  for (const NamedArg& a : args) {
    const auto i = schema.arg_index(a.name);
    QFLOW_CHECK(i.has_value(), "{}: no argument named '{}'; its schema declares ({})", schema.full_name(), a.name,
                names_of(schema));
    QFLOW_CHECK(!given[*i], "{}: argument '{}' is given twice", schema.full_name(), a.name);
    stack[*i] = a.value;
    given[*i] = true;
  }
  for (size_t i = 0; i < stack.size(); ++i) {
    if (given[i]) continue;
    const ArgSpec& spec = schema.args[i];
    QFLOW_CHECK(spec.default_value || spec.optional, "{}: missing argument '{}' ({})", schema.full_name(), spec.name,
                arg_type_name(spec.type));
    if (spec.default_value) stack[i] = *spec.default_value;
  }
  return stack;
}

const Value& OpArgs::default_of(size_t i) const {
  const ArgSpec& spec = schema_->args[i];
  if (!spec.default_value) [[unlikely]] not_passed(i);
  return *spec.default_value;
}

void OpArgs::unknown(std::string_view name) const {
  QFLOW_FAIL("{}: no argument named '{}'; its schema declares ({})", schema_->full_name(), name, names_of(*schema_));
}

void OpArgs::not_passed(size_t i) const {
  QFLOW_FAIL("{}: argument '{}' was not passed ({} of {} arguments given)", schema_->full_name(), schema_->args[i].name,
             stack_->size(), schema_->args.size());
}

}  // namespace qflow
