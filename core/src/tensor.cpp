// Tensor methods: metadata reads plus one-line forwards to the functional API (ops.h).
#include "qflow/core/tensor.h"

#include "qflow/core/autograd_hooks.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {

namespace {
int64_t wrap(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = ndim > 0 ? ndim : 1;
  QFLOW_CHECK(dim >= -n && dim < n, "{}: dimension {} out of range for a {}-d tensor (expected in [{}, {}])", op, dim,
              ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}
}  // namespace

SymInt Tensor::size(int64_t dim) const {
  const int64_t d = wrap(dim, this->dim(), "size");
  const int64_t concrete = impl_->dim() == 0 ? 1 : impl_->sizes()[d];
  if (const TensorExtension* ext = impl_->extension()) return ext->sym_size(d, concrete);
  return SymInt(concrete);
}

SymIntList Tensor::sym_sizes() const {
  SymIntList out;
  for (int64_t d = 0; d < dim(); ++d) out.push_back(size(d));
  return out;
}

int64_t Tensor::stride(int64_t dim) const {
  const int64_t d = wrap(dim, this->dim(), "stride");
  return impl_->dim() == 0 ? 1 : impl_->strides()[d];
}

void* Tensor::raw_data() const {
  checked_impl()->make_plain();  // See Note [Opaque layouts]
  void* p = impl_->data();
  QFLOW_CHECK(p != nullptr || numel() == 0, "data access on a tensor without storage (a traced proxy has no values)");
  return p;
}

Scalar Tensor::item() const {
  static const OpHandle op("item");
  Stack out = call(op, {{"self", *this}});
  return out.at(0).scalar();
}

// ---- autograd ------------------------------------------------------------------------------
bool Tensor::requires_grad() const {
  const AutogradHooks* h = autograd_hooks_or_null();
  return h != nullptr && defined() && h->requires_grad(*this);
}
Tensor& Tensor::requires_grad_(bool value) {
  autograd_hooks().set_requires_grad(*this, value);
  return *this;
}
Tensor Tensor::grad() const { return autograd_hooks().grad(*this); }
void Tensor::set_grad(const Tensor& g) const { autograd_hooks().set_grad(*this, g); }
bool Tensor::is_leaf() const {
  const AutogradHooks* h = autograd_hooks_or_null();
  return h == nullptr || h->is_leaf(*this);
}
std::string Tensor::grad_fn_name() const {
  const AutogradHooks* h = autograd_hooks_or_null();
  return h == nullptr ? std::string() : h->grad_fn_name(*this);
}
void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd_hooks().backward(*this, gradient, retain_graph);
}
void Tensor::retain_grad() const { autograd_hooks().retain_grad(*this); }
Tensor Tensor::detach() const {
  static const OpHandle op("detach");
  return call_tensor(op, {{"self", *this}});
}
Tensor& Tensor::detach_() {
  checked_impl()->set_autograd_meta(nullptr);
  return *this;
}
uint64_t Tensor::version() const {
  const auto& s = checked_impl()->storage();
  return s ? s->version() : 0;
}

// ---- the methods written by hand (the declared ops' are generated: Note [One declaration per op])
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) const { return qflow::slice(*this, d, s, e, st); }
Tensor Tensor::expand_as(const Tensor& o) const { return qflow::expand(*this, o.sym_sizes()); }
Tensor Tensor::to(DType d) const { return qflow::to_dtype(*this, d); }

// ---- operators --------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return add_(a, b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return sub_(a, b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return mul_(a, b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return div_(a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }

}  // namespace qflow
