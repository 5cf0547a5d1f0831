// GraphModule: building from a root, running, validating, dotted-path surgery and cloning.
// code() lives in graph_module_code.cpp.
#include "qflow/fx/graph_module.h"

#include <optional>
#include <set>

#include "qflow/fx/interpreter.h"
#include "qflow/nn/cloneable.h"

namespace qflow::fx {

namespace {

std::string join(const std::string& prefix, const std::string& name) { return prefix.empty() ? name : prefix + "." + name; }

// ("layer1.0", "conv1") for "layer1.0.conv1"; ("", "conv1") for "conv1".
std::pair<std::string, std::string> split_last(std::string_view path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos) return {"", std::string(path)};
  return {std::string(path.substr(0, dot)), std::string(path.substr(dot + 1))};
}

std::vector<std::string> split(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    parts.emplace_back(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

nn::ModulePtr child_named(const nn::Module& m, const std::string& name) {
  for (const auto& [n, c] : m.named_children())
    if (n == name) return c;
  return nullptr;
}

std::optional<Tensor> find_tensor(const std::vector<nn::NamedTensor>& entries, const std::string& name) {
  for (const auto& [n, t] : entries)
    if (n == name) return t;
  return std::nullopt;
}

// What a graph needs from the module it runs on.
struct Targets {
  std::set<std::string> modules;     // call_module targets
  std::set<std::string> attributes;  // get_attr targets
  bool needs_below(const std::string& path) const {
    const std::string prefix = path + ".";
    for (const auto* set : {&modules, &attributes})
      for (const auto& t : *set)
        if (t.compare(0, prefix.size(), prefix) == 0) return true;
    return false;
  }
};

Targets targets_of(const Graph& graph) {
  Targets t;
  for (const Node* n : graph) {
    if (n->op() == NodeOp::CallModule) t.modules.insert(n->target());
    if (n->op() == NodeOp::GetAttr) t.attributes.insert(n->target());
  }
  return t;
}

// Mirrors `src` (at `prefix` in the root) into `dst`: the needed parameters and buffers, the
// needed submodules themselves (shared), and containers on the way to deeper needs — all in
// src's registration order, so state_dict keys come out in the root's order.
void mirror(nn::Module& dst, const nn::Module& src, const std::string& prefix, const Targets& need,
            const std::set<std::string>& persistent) {
  for (const auto& [name, t] : src.named_parameters(false))
    if (need.attributes.count(join(prefix, name))) dst.register_parameter(name, t, t.requires_grad());
  for (const auto& [name, t] : src.named_buffers(false)) {
    const std::string path = join(prefix, name);
    if (need.attributes.count(path)) dst.register_buffer(name, t, persistent.count(path) > 0);
  }
  for (const auto& [name, child] : src.named_children()) {
    const std::string path = join(prefix, name);
    if (need.modules.count(path)) {
      dst.register_module(name, child);
    } else if (need.needs_below(path)) {
      auto container = std::make_shared<ModuleContainer>();
      container->train(child->is_training());  // while empty, so only its own flag changes
      mirror(*container, *child, path, need, persistent);
      dst.register_module(name, container);
    }
  }
}

}  // namespace

nn::ModulePtr ModuleContainer::clone() const {
  auto copy = std::make_shared<ModuleContainer>();
  clone_entries_into(*copy);
  return copy;
}

GraphModule::GraphModule(nn::Module& root, std::unique_ptr<Graph> graph, std::map<std::string, Tensor> constants,
                         std::string class_name)
    : graph_(std::move(graph)), constants_(std::move(constants)), class_name_(std::move(class_name)) {
  QFLOW_CHECK(graph_ != nullptr, "GraphModule: the graph is null");
  copy_entries_from(root);
  recompile();
}

void GraphModule::copy_entries_from(nn::Module& root) {
  Module::train(root.is_training());  // before any child exists: sets this module's flag only
  Targets need = targets_of(*graph_);
  const auto* root_gm = dynamic_cast<const GraphModule*>(&root);
  for (auto it = need.attributes.begin(); it != need.attributes.end();) {
    if (constants_.count(*it)) {
      it = need.attributes.erase(it);
    } else if (root_gm && root_gm->constants_.count(*it)) {  // rebuilding over another GraphModule
      constants_.emplace(*it, root_gm->constants_.at(*it));
      it = need.attributes.erase(it);
    } else {
      ++it;
    }
  }
  std::set<std::string> persistent;
  for (const auto& [key, t] : root.state_dict()) persistent.insert(key);
  mirror(*this, root, "", need, persistent);
  // Entries the ordered walk cannot reach (a module registered twice in one parent) are
  // looked up by path and added at the end.
  for (const std::string& path : need.modules)
    if (!has_submodule_path(path)) add_submodule(path, root.get_submodule(path));
  for (const std::string& path : need.attributes) {
    if (has_attr(path)) continue;
    auto [owner_path, name] = split_last(path);
    nn::ModulePtr owner = root.get_submodule(owner_path);  // throws naming the missing part
    add_submodule_chain(owner_path);
    nn::ModulePtr dst = get_submodule(owner_path);
    if (auto p = find_tensor(owner->named_parameters(false), name)) {
      dst->register_parameter(name, *p, p->requires_grad());
    } else if (auto b = find_tensor(owner->named_buffers(false), name)) {
      dst->register_buffer(name, *b, persistent.count(path) > 0);
    } else {
      QFLOW_FAIL("GraphModule: get_attr target '{}' is not a parameter or buffer of {}", path, root.type_name());
    }
  }
}

bool GraphModule::has_submodule_path(std::string_view path) const {
  const nn::Module* m = this;
  nn::ModulePtr hold;
  if (path.empty()) return true;
  for (const std::string& part : split(path)) {
    hold = child_named(*m, part);
    if (!hold) return false;
    m = hold.get();
  }
  return true;
}

nn::ModulePtr GraphModule::add_submodule_chain(std::string_view path) {
  nn::ModulePtr current = get_submodule("");
  if (path.empty()) return current;
  for (const std::string& part : split(path)) {
    nn::ModulePtr next = child_named(*current, part);
    if (!next) next = current->register_module(part, std::make_shared<ModuleContainer>());
    current = next;
  }
  return current;
}

TensorList GraphModule::forward_list(const TensorList& inputs) { return Interpreter(*this).run(inputs); }

Tensor GraphModule::forward(const Tensor& input) {
  TensorList out = forward_list({input});
  QFLOW_CHECK(out.size() == 1, "{}: the graph returns {} outputs; use call() for several", class_name_, out.size());
  return out[0];
}

void GraphModule::recompile() { graph_->lint(this); }

void GraphModule::add_submodule(std::string_view path, nn::ModulePtr module) {
  QFLOW_CHECK(!path.empty(), "GraphModule::add_submodule: the path is empty");
  QFLOW_CHECK(module != nullptr, "GraphModule::add_submodule: the module for '{}' is null", path);
  auto [parent_path, name] = split_last(path);
  nn::ModulePtr parent = add_submodule_chain(parent_path);
  if (child_named(*parent, name)) parent->replace_module(name, std::move(module));
  else parent->register_module(name, std::move(module));
}

bool GraphModule::delete_submodule(std::string_view path) {
  if (path.empty() || !has_submodule_path(path)) return false;
  auto [parent_path, name] = split_last(path);
  return get_submodule(parent_path)->unregister_module(name) != nullptr;
}

void GraphModule::delete_all_unused_submodules() {
  const Targets need = targets_of(*graph_);
  auto used = [&](const std::string& path) {
    for (const auto* set : {&need.modules, &need.attributes})
      for (const auto& t : *set)
        if (t == path || t.compare(0, path.size() + 1, path + ".") == 0) return true;
    return false;
  };
  // Deepest paths first, so a container emptied of its children can go too.
  std::vector<std::string> paths;
  for (const auto& [path, m] : named_modules())
    if (!path.empty()) paths.push_back(path);
  for (auto it = paths.rbegin(); it != paths.rend(); ++it)
    if (!used(*it)) delete_submodule(*it);
}

bool GraphModule::has_attr(std::string_view target) const {
  if (constants_.count(std::string(target))) return true;
  auto [owner_path, name] = split_last(target);
  if (!has_submodule_path(owner_path)) return false;
  nn::ModulePtr owner = get_submodule(owner_path);
  return find_tensor(owner->named_parameters(false), name) || find_tensor(owner->named_buffers(false), name);
}

Tensor GraphModule::get_attr(std::string_view target) const {
  if (auto it = constants_.find(std::string(target)); it != constants_.end()) return it->second;
  auto [owner_path, name] = split_last(target);
  nn::ModulePtr owner = get_submodule(owner_path);  // throws naming the missing part
  if (auto p = find_tensor(owner->named_parameters(false), name)) return *p;
  if (auto b = find_tensor(owner->named_buffers(false), name)) return *b;
  QFLOW_FAIL("{}: no parameter, buffer or constant '{}'", class_name_, target);
}

std::string GraphModule::add_constant(Tensor value, std::string_view hint) {
  QFLOW_CHECK(value.defined(), "GraphModule::add_constant: the tensor is undefined");
  std::string name;
  for (size_t i = 0; name.empty() || constants_.count(name) || has_attr(name) || has_submodule_path(name); ++i) {
    name = fmt::format("{}{}", hint, i);
  }
  constants_.emplace(name, std::move(value));
  return name;
}

nn::ModulePtr GraphModule::clone() const {
  std::shared_ptr<GraphModule> copy(new GraphModule(CloneTag{}));
  clone_entries_into(*copy);
  copy->graph_ = graph_->clone();
  for (const auto& [name, t] : constants_) copy->constants_.emplace(name, nn::detail::clone_tensor(t));
  copy->class_name_ = class_name_;
  return copy;
}

}  // namespace qflow::fx
