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

// ---- views and copies ----------------------------------------------------------------------
Tensor Tensor::view(const SymIntList& s) const { return qflow::view(*this, s); }
Tensor Tensor::reshape(const SymIntList& s) const { return qflow::reshape(*this, s); }
Tensor Tensor::permute(const IntList& d) const { return qflow::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return qflow::transpose(*this, a, b); }
Tensor Tensor::t() const { return qflow::t(*this); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return qflow::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) const { return qflow::slice(*this, d, s, e, st); }
Tensor Tensor::select(int64_t d, int64_t i) const { return qflow::select(*this, d, i); }
Tensor Tensor::squeeze() const { return qflow::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return qflow::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return qflow::unsqueeze(*this, d); }
Tensor Tensor::expand(const SymIntList& s) const { return qflow::expand(*this, s); }
Tensor Tensor::expand_as(const Tensor& o) const { return qflow::expand(*this, o.sym_sizes()); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return qflow::flatten(*this, s, e); }
Tensor Tensor::contiguous() const { return qflow::contiguous(*this); }
Tensor Tensor::clone() const { return qflow::clone(*this); }
Tensor Tensor::to(DType d) const { return qflow::to_dtype(*this, d); }
Tensor Tensor::index_select(int64_t d, const Tensor& i) const { return qflow::index_select(*this, d, i); }
Tensor& Tensor::copy_(const Tensor& s) { return qflow::copy_(*this, s); }
Tensor& Tensor::fill_(const Scalar& v) { return qflow::fill_(*this, v); }
Tensor& Tensor::zero_() { return qflow::zero_(*this); }

// ---- element-wise ------------------------------------------------------------------------------
Tensor Tensor::add(const Tensor& o, const Scalar& a) const { return qflow::add(*this, o, a); }
Tensor Tensor::add(const Scalar& o) const { return qflow::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, const Scalar& a) const { return qflow::sub(*this, o, a); }
Tensor Tensor::sub(const Scalar& o) const { return qflow::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return qflow::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return qflow::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return qflow::div(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return qflow::div(*this, o); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& a) { return qflow::add_(*this, o, a); }
Tensor& Tensor::add_(const Scalar& o) { return qflow::add_(*this, o); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& a) { return qflow::sub_(*this, o, a); }
Tensor& Tensor::sub_(const Scalar& o) { return qflow::sub_(*this, o); }
Tensor& Tensor::mul_(const Tensor& o) { return qflow::mul_(*this, o); }
Tensor& Tensor::mul_(const Scalar& o) { return qflow::mul_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return qflow::div_(*this, o); }
Tensor& Tensor::div_(const Scalar& o) { return qflow::div_(*this, o); }
Tensor Tensor::neg() const { return qflow::neg(*this); }
Tensor Tensor::abs() const { return qflow::abs(*this); }
Tensor Tensor::exp() const { return qflow::exp(*this); }
Tensor Tensor::log() const { return qflow::log(*this); }
Tensor Tensor::sqrt() const { return qflow::sqrt(*this); }
Tensor Tensor::rsqrt() const { return qflow::rsqrt(*this); }
Tensor Tensor::pow(const Tensor& e) const { return qflow::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return qflow::pow(*this, e); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return qflow::clamp(*this, lo, hi); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) { return qflow::clamp_(*this, lo, hi); }
Tensor Tensor::minimum(const Tensor& o) const { return qflow::minimum(*this, o); }
Tensor Tensor::maximum(const Tensor& o) const { return qflow::maximum(*this, o); }
Tensor Tensor::relu() const { return qflow::relu(*this); }
Tensor& Tensor::relu_() { return qflow::relu_(*this); }
Tensor Tensor::sigmoid() const { return qflow::sigmoid(*this); }
Tensor Tensor::tanh() const { return qflow::tanh(*this); }
Tensor Tensor::sign() const { return qflow::sign(*this); }
Tensor Tensor::round() const { return qflow::round(*this); }
Tensor Tensor::floor() const { return qflow::floor(*this); }
Tensor Tensor::eq(const Tensor& o) const { return qflow::eq(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return qflow::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return qflow::ne(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return qflow::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return qflow::lt(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return qflow::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return qflow::le(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return qflow::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return qflow::gt(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return qflow::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return qflow::ge(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return qflow::ge(*this, o); }

// ---- reductions ------------------------------------------------------------------------------
Tensor Tensor::sum(const IntList& d, bool k) const { return qflow::sum(*this, d, k); }
Tensor Tensor::mean(const IntList& d, bool k) const { return qflow::mean(*this, d, k); }
Tensor Tensor::var(const IntList& d, bool u, bool k) const { return qflow::var(*this, d, u, k); }
Tensor Tensor::std(const IntList& d, bool u, bool k) const { return qflow::std(*this, d, u, k); }
Tensor Tensor::max() const { return qflow::max(*this); }
Tensor Tensor::min() const { return qflow::min(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return qflow::max(*this, d, k); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return qflow::min(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return qflow::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return qflow::argmin(*this, d, k); }
Tensor Tensor::amax(const IntList& d, bool k) const { return qflow::amax(*this, d, k); }
Tensor Tensor::amin(const IntList& d, bool k) const { return qflow::amin(*this, d, k); }
Tensor Tensor::logsumexp(const IntList& d, bool k) const { return qflow::logsumexp(*this, d, k); }

// ---- linear algebra ----------------------------------------------------------------------------
Tensor Tensor::matmul(const Tensor& o) const { return qflow::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return qflow::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return qflow::bmm(*this, o); }

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
