// The clone machinery behind Cloneable; see Note [Module cloning].
#include <unordered_map>

#include "qflow/core/generator.h"
#include "qflow/nn/cloneable.h"

namespace qflow::nn {

namespace detail {

// Reads the registries for the consistency check in CloneScope::finish.
class CloneAccess {
 public:
  static std::vector<std::string> names(const Module& m, char kind) {
    std::vector<std::string> out;
    if (kind == 'p') {
      for (const auto& s : m.parameters_) out.push_back(s.name);
    } else if (kind == 'b') {
      for (const auto& s : m.buffers_) out.push_back(s.name + (s.persistent ? "" : " (non-persistent)"));
    } else {
      for (const auto& c : m.children_) out.push_back(c.first);
    }
    return out;
  }
  static void set_training(Module& m, bool on) { m.training_ = on; }
};

namespace {

struct Frame {
  const Module* source;
  Module* target = nullptr;  // set when the copy's Cloneable constructor runs
};

// Clones being built on this thread, innermost last.
thread_local std::vector<Frame> t_frames;

// Sharing survives a clone: a module or tensor reached twice is copied once (PyTorch's
// deepcopy memo). One memo lives as long as the outermost clone on this thread.
struct Memo {
  std::unordered_map<const Module*, ModulePtr> modules;
  std::unordered_map<const TensorImpl*, Tensor> tensors;
};
thread_local Memo* t_memo = nullptr;

}  // namespace

CloneMemoScope::CloneMemoScope() : owner_(t_memo == nullptr) {
  if (owner_) t_memo = new Memo();
}

CloneMemoScope::~CloneMemoScope() {
  if (owner_) {
    delete t_memo;
    t_memo = nullptr;
  }
}

ModulePtr clone_child(const ModulePtr& source) {
  if (t_memo == nullptr) return source->clone();
  auto it = t_memo->modules.find(source.get());
  if (it != t_memo->modules.end()) return it->second;
  ModulePtr copy = source->clone();
  t_memo->modules.emplace(source.get(), copy);
  return copy;
}

Tensor clone_tensor(const Tensor& source) {
  if (!source.defined()) return source;
  if (t_memo != nullptr) {
    auto it = t_memo->tensors.find(source.impl());
    if (it != t_memo->tensors.end()) return it->second;
  }
  Tensor copy = source.detach().clone();
  if (source.requires_grad()) copy.requires_grad_();
  if (t_memo != nullptr) t_memo->tensors.emplace(source.impl(), copy);
  return copy;
}

CloneScope::CloneScope(const Module& source)
    : source_(source), rng_seed_(default_generator().seed()), rng_offset_(default_generator().offset()) {
  t_frames.push_back({&source, nullptr});
}

CloneScope::~CloneScope() {
  t_frames.pop_back();
  // Rebuilding ran initializers whose random draws were thrown away; undo them.
  default_generator().set_state(rng_seed_, rng_offset_);
}

void CloneScope::finish(Module& copy) const {
  QFLOW_ASSERT(!t_frames.empty() && t_frames.back().target == &copy,
               "clone of {}: the rebuilt module did not claim its clone scope", source_.type_name());
  for (char kind : {'p', 'b', 'c'}) {
    const auto want = CloneAccess::names(source_, kind);
    const auto got = CloneAccess::names(copy, kind);
    const char* what = kind == 'p' ? "parameters" : kind == 'b' ? "buffers" : "submodules";
    QFLOW_CHECK(want == got,
                "clone: rebuilding {} registered the {} [{}] but the module has [{}]; a module whose entries change "
                "after construction needs a public reset() that registers them (see Note [Module cloning])",
                source_.type_name(), what, fmt::join(got, ", "), fmt::join(want, ", "));
  }
  CloneAccess::set_training(copy, source_.is_training());
}

const Module* clone_source_of(const Module* target) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->target == target) return it->source;
  }
  return nullptr;
}

void fail_clone(const Module& m, const char* why) {
  QFLOW_FAIL("clone: {} cannot be cloned: {} (see Note [Module cloning])", m.type_name(), why);
}

}  // namespace detail

void Module::claim_clone_target(const Module* copied_from) {
  if (detail::t_frames.empty()) return;
  detail::Frame& frame = detail::t_frames.back();
  if (frame.target != nullptr) return;  // a module built while rebuilding the copy
  if (copied_from != nullptr && copied_from != frame.source) return;
  frame.target = this;
  // A copy-constructed clone shares the source's entries until reset() registers its own.
  parameters_.clear();
  buffers_.clear();
  children_.clear();
}

}  // namespace qflow::nn
