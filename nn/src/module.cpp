// Module: calling, registration, traversal and lookup. State (state_dict, to) lives in
// module_state.cpp, printing in module_repr.cpp, cloning in clone.cpp.
#include "qflow/nn/module.h"

#include <unordered_set>

#include "qflow/autograd/grad_mode.h"
#include "qflow/nn/cloneable.h"

namespace qflow::nn {

namespace {

thread_local ModuleCallHook* t_module_call_hook = nullptr;

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::vector<std::string_view> split_path(std::string_view path, const char* op) {
  std::vector<std::string_view> parts;
  if (path.empty()) return parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    QFLOW_CHECK(!part.empty(), "{}: empty name in path '{}'", op, path);
    parts.push_back(part);
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// "'layer1.0' (BasicBlock)" for a descendant, "Net" for the root.
std::string describe_module(const std::string& path, const Module& m) {
  return path.empty() ? m.type_name() : fmt::format("'{}' ({})", path, m.type_name());
}

}  // namespace

ModuleCallHook* module_call_hook() { return t_module_call_hook; }

ModuleCallHookGuard::ModuleCallHookGuard(ModuleCallHook* hook) : previous_(t_module_call_hook) {
  t_module_call_hook = hook;
}

ModuleCallHookGuard::~ModuleCallHookGuard() { t_module_call_hook = previous_; }

// ---- calling -------------------------------------------------------------------------------

TensorList Module::call(const TensorList& inputs) {
  if (ModuleCallHook* hook = t_module_call_hook) {
    return hook->call(*this, inputs, [this](const TensorList& in) { return forward_list(in); });
  }
  return forward_list(inputs);
}

Tensor Module::operator()(const Tensor& input) { return single_output(call(TensorList{input})); }

Tensor Module::forward(const Tensor&) {
  QFLOW_FAIL("{}: forward(const Tensor&) is not implemented (override forward or forward_list)", type_name());
}

TensorList Module::forward_list(const TensorList& inputs) {
  QFLOW_CHECK(inputs.size() == 1, "{}: forward takes 1 input, got {} (override forward_list to take several)",
              type_name(), inputs.size());
  return {forward(inputs[0])};
}

Tensor Module::single_output(const TensorList& outputs) {
  QFLOW_CHECK(outputs.size() == 1, "module call returned {} outputs; use call() for modules with several outputs",
              outputs.size());
  return outputs[0];
}

// ---- registration --------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  QFLOW_CHECK(!name.empty(), "{}: name must not be empty (in {})", what, type_name());
  QFLOW_CHECK(name.find('.') == std::string::npos, "{}: name '{}' must not contain '.' (in {})", what, name,
              type_name());
  const char* kind = find_slot(parameters_, name) ? "parameter" : find_slot(buffers_, name) ? "buffer" : nullptr;
  for (const auto& child : children_) {
    if (child.first == name) kind = "submodule";
  }
  QFLOW_CHECK(kind == nullptr, "{}: '{}' is already registered as a {} of {}", what, name, kind, type_name());
}

const Module::Slot* Module::find_slot(const std::vector<Slot>& slots, std::string_view name) const {
  for (const Slot& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Tensor Module::register_parameter(std::string name, Tensor value, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (const Module* source = detail::clone_source_of(this)) {  // See Note [Module cloning].
    if (const Slot* s = find_slot(source->parameters_, name)) {
      parameters_.push_back({std::move(name), detail::clone_tensor(s->value), true});
      return parameters_.back().value;
    }
  }
  if (value.defined()) {
    QFLOW_CHECK(!requires_grad || value.is_floating_point(),
                "register_parameter: '{}' of {} has dtype {}; only floating point parameters can require gradients "
                "(pass requires_grad = false)",
                name, type_name(), value.dtype());
    if (!value.is_leaf()) value = value.detach();  // a parameter starts a graph, it is not part of one
    value.requires_grad_(requires_grad);
  }
  parameters_.push_back({std::move(name), std::move(value), true});
  return parameters_.back().value;
}

Tensor Module::register_buffer(std::string name, Tensor value, bool persistent) {
  check_new_name(name, "register_buffer");
  if (const Module* source = detail::clone_source_of(this)) {  // See Note [Module cloning].
    if (const Slot* s = find_slot(source->buffers_, name)) {
      buffers_.push_back({std::move(name), detail::clone_tensor(s->value), s->persistent});
      return buffers_.back().value;
    }
  }
  buffers_.push_back({std::move(name), std::move(value), persistent});
  return buffers_.back().value;
}

ModulePtr Module::register_child(std::string name, ModulePtr module) {
  check_new_name(name, "register_module");
  QFLOW_CHECK(module != nullptr, "register_module: submodule '{}' of {} is null", name, type_name());
  if (const Module* source = detail::clone_source_of(this)) {  // See Note [Module cloning].
    for (const auto& [child_name, child] : source->children_) {
      if (child_name == name) {
        children_.emplace_back(std::move(name), detail::clone_child(child));
        return children_.back().second;
      }
    }
  }
  for (const auto& [path, m] : module->walk(true, true)) {
    QFLOW_CHECK(m != this, "register_module: registering '{}' in {} would make the module its own descendant", name,
                type_name());
  }
  children_.emplace_back(std::move(name), std::move(module));
  return children_.back().second;
}

ModulePtr Module::unregister_module(std::string_view name) {
  ModulePtr removed;
  std::erase_if(children_, [&](const NamedModule& c) {
    if (c.first != name) return false;
    removed = c.second;
    return true;
  });
  return removed;
}

ModulePtr Module::replace_module(std::string_view name, ModulePtr module) {
  QFLOW_CHECK(module != nullptr, "replace_module: the new submodule '{}' of {} is null", name, type_name());
  for (const auto& [path, m] : module->walk(true, true)) {
    QFLOW_CHECK(m != this, "replace_module: putting '{}' in {} would make the module its own descendant", name,
                type_name());
  }
  ModulePtr replaced;
  for (auto& child : children_) {
    if (child.first != name) continue;
    replaced = child.second;
    child.second = module;
  }
  QFLOW_CHECK(replaced != nullptr, "replace_module: {} has no submodule '{}'", type_name(), name);
  return replaced;
}

// ---- traversal -----------------------------------------------------------------------------

std::vector<std::pair<std::string, const Module*>> Module::walk(bool recurse, bool dedup) const {
  std::vector<std::pair<std::string, const Module*>> out;
  std::unordered_set<const Module*> seen;
  // Explicit stack in reverse child order keeps the walk pre-order without recursion.
  std::vector<std::pair<std::string, const Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [path, m] = std::move(stack.back());
    stack.pop_back();
    if (dedup && !seen.insert(m).second) continue;
    out.emplace_back(path, m);
    if (!recurse) break;
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it) {
      stack.emplace_back(join(path, it->first), it->second.get());
    }
  }
  return out;
}

std::vector<NamedTensor> Module::named_parameters(bool recurse) const {
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [path, m] : walk(recurse, true)) {
    for (const Slot& s : m->parameters_) {
      if (s.value.defined() && seen.insert(s.value.impl()).second) out.emplace_back(join(path, s.name), s.value);
    }
  }
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(std::move(t));
  return out;
}

std::vector<NamedTensor> Module::named_buffers(bool recurse) const {
  std::vector<NamedTensor> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [path, m] : walk(recurse, true)) {
    for (const Slot& s : m->buffers_) {
      if (s.value.defined() && seen.insert(s.value.impl()).second) out.emplace_back(join(path, s.name), s.value);
    }
  }
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(std::move(t));
  return out;
}

std::vector<NamedModule> Module::named_children() const {
  std::vector<NamedModule> out;
  std::unordered_set<const Module*> seen;
  for (const auto& child : children_) {
    if (seen.insert(child.second.get()).second) out.push_back(child);
  }
  return out;
}

std::vector<ModulePtr> Module::children() const {
  std::vector<ModulePtr> out;
  for (auto& [name, m] : named_children()) out.push_back(std::move(m));
  return out;
}

ModulePtr Module::self_ptr() {
  if (ModulePtr p = weak_from_this().lock()) return p;
  // Not owned by a shared_ptr (a module on the stack): a non-owning handle.
  return ModulePtr(ModulePtr(), this);
}

std::vector<NamedModule> Module::named_modules() {
  std::vector<NamedModule> out;
  std::unordered_set<const Module*> seen;
  std::vector<NamedModule> stack{{"", self_ptr()}};
  while (!stack.empty()) {
    NamedModule item = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(item.second.get()).second) continue;
    const auto& kids = item.second->children_;
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.emplace_back(join(item.first, it->first), it->second);
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<ModulePtr> Module::modules() {
  std::vector<ModulePtr> out;
  for (auto& [name, m] : named_modules()) out.push_back(std::move(m));
  return out;
}

// ---- lookup by dotted path -----------------------------------------------------------------

ModulePtr Module::get_submodule(std::string_view path) const {
  ModulePtr current = const_cast<Module*>(this)->self_ptr();
  std::string walked;
  for (std::string_view part : split_path(path, "get_submodule")) {
    ModulePtr next;
    std::vector<std::string> names;
    for (const auto& [name, child] : current->children_) {
      if (name == part) next = child;
      names.push_back(name);
    }
    QFLOW_CHECK(next != nullptr, "get_submodule('{}'): {} has no submodule '{}'; its submodules are [{}]", path,
                describe_module(walked, *current), part, fmt::join(names, ", "));
    walked = join(walked, std::string(part));
    current = std::move(next);
  }
  return current;
}

Tensor Module::get_parameter(std::string_view path) const {
  const size_t dot = path.rfind('.');
  const std::string_view owner_path = dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
  const std::string_view name = dot == std::string_view::npos ? path : path.substr(dot + 1);
  ModulePtr owner = get_submodule(owner_path);
  const Slot* s = owner->find_slot(owner->parameters_, name);
  std::vector<std::string> names;
  for (const Slot& p : owner->parameters_) names.push_back(p.name);
  QFLOW_CHECK(s != nullptr, "get_parameter('{}'): {} has no parameter '{}'; its parameters are [{}]", path,
              describe_module(std::string(owner_path), *owner), name, fmt::join(names, ", "));
  return s->value;
}

Tensor Module::get_buffer(std::string_view path) const {
  const size_t dot = path.rfind('.');
  const std::string_view owner_path = dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
  const std::string_view name = dot == std::string_view::npos ? path : path.substr(dot + 1);
  ModulePtr owner = get_submodule(owner_path);
  const Slot* s = owner->find_slot(owner->buffers_, name);
  std::vector<std::string> names;
  for (const Slot& b : owner->buffers_) names.push_back(b.name);
  QFLOW_CHECK(s != nullptr, "get_buffer('{}'): {} has no buffer '{}'; its buffers are [{}]", path,
              describe_module(std::string(owner_path), *owner), name, fmt::join(names, ", "));
  return s->value;
}

// ---- modes ---------------------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (auto& child : children_) child.second->train(on);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& child : named_children()) child.second->apply(fn);
  fn(*this);
}

void Module::zero_grad() {
  for (const Tensor& p : parameters()) {
    if (p.grad().defined()) p.set_grad(Tensor());
  }
}

// ---- copies --------------------------------------------------------------------------------

Module::Module(const Module& other)
    : std::enable_shared_from_this<Module>(),
      parameters_(other.parameters_),
      buffers_(other.buffers_),
      children_(other.children_),
      training_(other.training_) {}

Module::Module(Module&& other) noexcept
    : std::enable_shared_from_this<Module>(),
      parameters_(std::move(other.parameters_)),
      buffers_(std::move(other.buffers_)),
      children_(std::move(other.children_)),
      training_(other.training_) {}

void Module::clone_entries_into(Module& dst) const {
  QFLOW_ASSERT(dst.parameters_.empty() && dst.buffers_.empty() && dst.children_.empty(),
               "clone_entries_into: the destination {} is not empty", dst.type_name());
  detail::CloneMemoScope memo;
  for (const Slot& s : parameters_) dst.parameters_.push_back({s.name, detail::clone_tensor(s.value), s.persistent});
  for (const Slot& s : buffers_) dst.buffers_.push_back({s.name, detail::clone_tensor(s.value), s.persistent});
  for (const auto& [name, child] : children_) dst.children_.emplace_back(name, detail::clone_child(child));
  dst.training_ = training_;
}

ModulePtr Module::clone() const {
  detail::fail_clone(*this, "it does not derive from nn::Cloneable");
}

}  // namespace qflow::nn
