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
  auto def = std::make_unique<OpDef>();
  def->schema = std::move(schema);
  def->shape = shape;
  def->kernel = kernel;
  def->name = name;
  OpDef& ref = *def;
  if (auto it = pending_.find(name); it != pending_.end()) {
    for (auto& edit : it->second) edit(ref);
    pending_.erase(it);
  }
  ops_.emplace(std::move(name), std::move(def));
  return ref;
}

void OpRegistry::edit_op(std::string_view full_name, std::function<void(OpDef&)> edit) {
  if (auto it = ops_.find(std::string(full_name)); it != ops_.end()) {
    edit(*it->second);
  } else {
    pending_[std::string(full_name)].push_back(std::move(edit));
  }
}

void OpRegistry::impl(std::string_view full_name, DeviceType type, KernelFn kernel) {
  QFLOW_CHECK(type != DeviceType::CPU, "impl('{}'): the cpu kernel is the one given to def()", full_name);
  QFLOW_CHECK(kernel != nullptr, "impl('{}', {}): null kernel", full_name, device_type_name(type));
  edit_op(full_name, [type, kernel](OpDef& op) {
    KernelFn& slot = op.device_kernels[static_cast<int>(type)];
    QFLOW_CHECK(slot == nullptr, "op '{}' has two {} kernels", op.name, device_type_name(type));
    slot = kernel;
  });
}

void OpRegistry::device_generic(std::initializer_list<std::string_view> full_names) {
  for (std::string_view n : full_names) edit_op(n, [](OpDef& op) { op.device_generic = true; });
}

void OpRegistry::no_kernel(std::initializer_list<std::string_view> full_names, DeviceType type, std::string_view reason) {
  for (std::string_view n : full_names)
    edit_op(n, [type, r = std::string(reason)](OpDef& op) { op.no_kernel_reasons[static_cast<int>(type)] = r; });
}

void OpRegistry::mixes_devices(std::string_view full_name) {
  edit_op(full_name, [](OpDef& op) { op.mixes_devices = true; });
}

std::vector<std::string> OpRegistry::unattached_declarations() const {
  std::vector<std::string> names;
  for (const auto& [name, edits] : pending_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// The device of the first defined tensor in `v`, checking the others against `device`.
void check_device(const OpDef& op, const Tensor& t, std::string_view arg, Device& device, std::string_view& first_arg,
                  bool& seen, bool& blocked) {
  if (!t.defined()) return;
  blocked = blocked || t.impl()->opaque_layout() != nullptr;
  const Device d = t.device();
  if (!seen) {
    device = d;
    first_arg = arg;
    seen = true;
  } else if (d != device && !op.mixes_devices) {
    QFLOW_FAIL("{}: expected all tensors on one device, but '{}' is on {} and '{}' on {}", op.name, first_arg, device,
               arg, d);
  }
}

}  // namespace

KernelFn OpDef::kernel_for(const Stack& args) const {
  Device device;
  std::string_view first_arg;
  bool seen = false, blocked = false;
  for (size_t i = 0; i < args.size() && i < schema.args.size(); ++i) {
    const Value& v = args[i];
    if (v.is_tensor()) {
      check_device(*this, v.tensor(), schema.args[i].name, device, first_arg, seen, blocked);
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.tensor_list())
        check_device(*this, t, schema.args[i].name, device, first_arg, seen, blocked);
    }
  }
  // The opaque-layout layer made every tensor plain unless the op has a blocked kernel.
  if (device.is_cpu()) return blocked && blocked_kernel ? blocked_kernel : kernel;
  const int type = static_cast<int>(device.type());
  if (KernelFn k = device_kernels[type]) return k;
  if (device_generic) return kernel;
  const std::string& reason = no_kernel_reasons[type];
  QFLOW_FAIL("{}: no kernel for {} tensors{}{}; move them with .to(Device::cpu()) to run it on the cpu", name, device,
             reason.empty() ? "" : ": ", reason);
}

void OpRegistry::impl_blocked(std::string_view full_name, KernelFn kernel) {
  QFLOW_CHECK(kernel != nullptr, "impl_blocked('{}'): null kernel", full_name);
  edit_op(full_name, [kernel](OpDef& op) {
    QFLOW_CHECK(op.blocked_kernel == nullptr, "op '{}' has two blocked-layout kernels", op.name);
    op.blocked_kernel = kernel;
  });
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
