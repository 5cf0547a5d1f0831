// AutogradMeta access and the hooks that implement Tensor's autograd methods.
#include "qflow/autograd/autograd_meta.h"

#include "qflow/autograd/engine.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/autograd_hooks.h"

namespace qflow::autograd {

AutogradMeta* meta_of(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd_meta()) : nullptr;
}

AutogradMeta& ensure_meta(const Tensor& t) {
  QFLOW_ASSERT(t.defined(), "autograd meta of an undefined tensor");
  if (auto* m = meta_of(t)) return *m;
  auto m = std::make_shared<AutogradMeta>();
  AutogradMeta& ref = *m;
  t.impl()->set_autograd_meta(std::move(m));
  return ref;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta_of(t);
  if (m == nullptr) return {};
  if (m->grad_fn) return Edge{m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

void set_history(const Tensor& t, std::shared_ptr<Node> fn, uint32_t output_nr) {
  AutogradMeta& m = ensure_meta(t);
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
  m.requires_grad = true;
  m.grad_accumulator.reset();
  t.impl()->add_key(kAutogradKey);
}

namespace {

class Hooks final : public AutogradHooks {
 public:
  bool requires_grad(const Tensor& t) const override {
    const AutogradMeta* m = meta_of(t);
    return m != nullptr && (m->requires_grad || m->grad_fn);
  }
  void set_requires_grad(const Tensor& t, bool value) const override {
    QFLOW_CHECK(t.defined(), "requires_grad_: undefined tensor");
    if (value) {
      QFLOW_CHECK(is_floating(t.dtype()), "requires_grad_: only floating point tensors can require gradients, got {}",
                  t.dtype());
    }
    AutogradMeta& m = ensure_meta(t);
    QFLOW_CHECK(!m.grad_fn || value,
                "requires_grad_: you can only change requires_grad of leaf tensors (this one was made by {}); use "
                "detach() instead",
                m.grad_fn ? m.grad_fn->name() : "");
    m.requires_grad = value;
    if (value) t.impl()->add_key(kAutogradKey);
    else if (!m.grad_fn) t.impl()->remove_key(kAutogradKey);
  }
  Tensor grad(const Tensor& t) const override {
    const AutogradMeta* m = meta_of(t);
    return m ? m->grad : Tensor();
  }
  void set_grad(const Tensor& t, const Tensor& g) const override {
    if (g.defined()) {
      QFLOW_CHECK(g.sizes() == t.sizes(), "set_grad: gradient of shape {} for a tensor of shape {}", g.sizes(), t.sizes());
      QFLOW_CHECK(g.dtype() == t.dtype(), "set_grad: gradient dtype {} for a tensor of dtype {}", g.dtype(), t.dtype());
    }
    ensure_meta(t).grad = g;
  }
  bool is_leaf(const Tensor& t) const override {
    const AutogradMeta* m = meta_of(t);
    return m == nullptr || !m->grad_fn;
  }
  std::string grad_fn_name(const Tensor& t) const override {
    const AutogradMeta* m = meta_of(t);
    return m && m->grad_fn ? m->grad_fn->name() : std::string();
  }
  void retain_grad(const Tensor& t) const override {
    AutogradMeta* m = meta_of(t);
    QFLOW_CHECK(m != nullptr && (m->requires_grad || m->grad_fn), "retain_grad: the tensor does not require grad");
    if (!m->grad_fn) return;  // leaves keep their grad anyway
    auto self = std::static_pointer_cast<AutogradMeta>(t.impl()->autograd_meta_ptr());
    m->grad_fn->retained().emplace_back(m->output_nr, self);
  }
  void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) const override {
    autograd::backward({root}, gradient.defined() ? TensorList{gradient} : TensorList{}, retain_graph);
  }
};

const Hooks g_hooks;
struct InstallHooks {
  InstallHooks() { set_autograd_hooks(&g_hooks); }
} g_install_hooks;

}  // namespace
}  // namespace qflow::autograd
