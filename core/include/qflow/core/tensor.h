#pragma once
// Tensor: a cheap value handle over a shared TensorImpl. Copying a Tensor copies the handle;
// views share storage. Every op method is a thin call into the op registry (see ops.h and
// Note [Op registration]); metadata accessors read the impl directly.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "qflow/core/scalar.h"
#include "qflow/core/sym_int.h"
#include "qflow/core/tensor_impl.h"

namespace qflow {

class Tensor;
using TensorList = std::vector<Tensor>;
using IntList = std::vector<int64_t>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  DType dtype() const { return checked_impl()->dtype(); }
  /// Where the elements live (Note [Devices]).
  Device device() const { return checked_impl()->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t dim() const { return checked_impl()->dim(); }
  int64_t numel() const { return checked_impl()->numel(); }
  /// Concrete sizes (for a traced proxy: the sizes seen while tracing).
  const std::vector<int64_t>& sizes() const { return checked_impl()->sizes(); }
  const std::vector<int64_t>& strides() const { return checked_impl()->strides(); }
  /// Size of one dim (negative dims count from the end). Symbolic for traced proxies:
  /// see Note [Symbolic sizes].
  SymInt size(int64_t dim) const;
  /// All sizes, symbolic for traced proxies.
  SymIntList sym_sizes() const;
  int64_t stride(int64_t dim) const;
  int64_t storage_offset() const { return checked_impl()->offset(); }
  bool is_contiguous() const { return checked_impl()->is_contiguous(); }
  size_t element_size() const { return qflow::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  /// True when both handles point at the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  /// Typed pointer to element 0; T must match dtype().
  template <typename T> T* data_ptr() const {
    QFLOW_CHECK(dtype() == dtype_v<T>, "data_ptr: tensor has dtype {}, requested {}", dtype(), dtype_v<T>);
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  /// The single element of a one-element tensor, converted to T.
  template <typename T> T item() const { return item().to<T>(); }
  Scalar item() const;

  // ---- autograd (implemented by the autograd layer; see AutogradHooks) -------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  bool is_leaf() const;
  /// Name of the node that created this tensor ("MulBackward"), empty for leaves.
  std::string grad_fn_name() const;
  /// Backward from this tensor. A non-scalar tensor needs an explicit `gradient`.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// Same data, no history, never requires grad.
  Tensor detach() const;
  Tensor& detach_();
  /// Makes a non-leaf keep its .grad during backward.
  void retain_grad() const;
  /// Storage version (bumped by in-place ops); see Note [Version counter].
  uint64_t version() const;

  // ---- views (share storage) -------------------------------------------------------------
  Tensor view(const SymIntList& sizes) const;
  Tensor reshape(const SymIntList& sizes) const;
  Tensor permute(const IntList& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const SymIntList& sizes) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  /// A copy on `device` (this tensor when it is already there); differentiable. Copying to the
  /// CPU waits for the device; copying to a device is queued on its stream.
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();

  // ---- element-wise ------------------------------------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  Tensor minimum(const Tensor& other) const;
  Tensor maximum(const Tensor& other) const;
  Tensor relu() const;
  Tensor& relu_();
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor sign() const;
  Tensor round() const;
  Tensor floor() const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;

  // ---- reductions (dims empty = all dims) --------------------------------------------------
  Tensor sum(const IntList& dims = {}, bool keepdim = false) const;
  Tensor mean(const IntList& dims = {}, bool keepdim = false) const;
  Tensor var(const IntList& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(const IntList& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor amax(const IntList& dims = {}, bool keepdim = false) const;
  Tensor amin(const IntList& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const IntList& dims, bool keepdim = false) const;

  // ---- linear algebra ----------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;

 private:
  TensorImpl* checked_impl() const {
    QFLOW_CHECK(impl_ != nullptr, "operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Operators follow PyTorch: arithmetic broadcasts; comparisons return bool tensors.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Scalar& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);

/// PyTorch-style printing: tensor([[1.0000, 2.0000]], requires_grad=True)
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

}  // namespace qflow

template <>
struct fmt::formatter<qflow::Tensor> : fmt::formatter<std::string_view> {
  auto format(const qflow::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(qflow::to_string(t), ctx);
  }
};
