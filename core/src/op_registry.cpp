#include "qflow/core/op_registry.h"

#include <algorithm>

namespace qflow {

OpRegistry& OpRegistry::instance() {
  static OpRegistry registry;
  return registry;
}

const OpDef& OpRegistry::def(std::string_view schema_text, ShapeFn shape, KernelFn kernel) {
  OpSchema schema = parse_schema(schema_text);
  std::string name = schema.full_name();
  QFLOW_CHECK(kernel != nullptr, "op '{}' registered without a kernel", name);
  QFLOW_CHECK(shape != nullptr, "op '{}' registered without a shape rule", name);
  QFLOW_CHECK(!ops_.count(name), "op '{}' is registered twice", name);
  auto def = std::make_unique<OpDef>(OpDef{std::move(schema), shape, kernel, name});
  const OpDef& ref = *def;
  ops_.emplace(std::move(name), std::move(def));
  return ref;
}

void OpRegistry::allow_opaque_layout(std::string_view full_name) {
  auto it = ops_.find(std::string(full_name));
  QFLOW_CHECK(it != ops_.end(), "allow_opaque_layout: unknown op '{}'", full_name);
  it->second->accepts_opaque_layout = true;
}

const OpDef* OpRegistry::find(std::string_view full_name) const {
  auto it = ops_.find(std::string(full_name));
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::get(std::string_view full_name) const {
  if (const OpDef* d = find(full_name)) return *d;
  std::vector<std::string> close;
  const std::string_view base = full_name.substr(0, full_name.find('.'));
  for (const auto& [name, def] : ops_)
    if (def->schema.name == base) close.push_back(name);
  std::sort(close.begin(), close.end());
  QFLOW_FAIL("unknown op '{}'{}", full_name, close.empty() ? "" : fmt::format(" (did you mean {}?)", fmt::join(close, ", ")));
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(def.get());
  std::sort(out.begin(), out.end(), [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return out;
}

const OpDef& OpHandle::check_names(NamedArgs args) const {
  const OpDef& def = get();
  const auto& params = def.schema.args;
  bool same = args.size() == params.size();
  for (size_t i = 0; same && i < params.size(); ++i) same = (args.begin() + i)->name == params[i].name;
  if (!same) {
    std::string given;
    for (const NamedArg& a : args) given += (given.empty() ? "" : ", ") + std::string(a.name);
    std::string declared;
    for (const ArgSpec& p : params) declared += (declared.empty() ? "" : ", ") + p.name;
    QFLOW_FAIL("typed wrapper of op '{}' passes arguments ({}) but its schema '{}' declares ({}) in this order", def.name,
               given, def.schema.to_string(), declared);
  }
  checked_.store(&def, std::memory_order_release);
  return def;
}

}  // namespace qflow
