#pragma once
// The autograd surface of Tensor (requires_grad, grad, backward, ...) lives in core's API
// but is implemented by the autograd layer, which installs these hooks at start-up. Core
// never includes autograd.
#include <string>

namespace qflow {

class Tensor;

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
  virtual bool requires_grad(const Tensor& t) const = 0;
  virtual void set_requires_grad(const Tensor& t, bool value) const = 0;
  virtual Tensor grad(const Tensor& t) const = 0;
  virtual void set_grad(const Tensor& t, const Tensor& grad) const = 0;
  virtual bool is_leaf(const Tensor& t) const = 0;
  virtual std::string grad_fn_name(const Tensor& t) const = 0;
  virtual void retain_grad(const Tensor& t) const = 0;
  virtual void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) const = 0;
};

void set_autograd_hooks(const AutogradHooks* hooks);
/// The installed hooks; throws qflow::Error when the autograd layer is not linked.
const AutogradHooks& autograd_hooks();
/// Null when the autograd layer is not linked.
const AutogradHooks* autograd_hooks_or_null();

}  // namespace qflow
