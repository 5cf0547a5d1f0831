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

  // ---- views, copies and conversions written by hand --------------------------------------
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor to(DType dtype) const;
  /// A copy on `device` (this tensor when it is already there); differentiable. Copying to the
  /// CPU waits for the device; copying to a device is queued on its stream.
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // ---- the declared ops' methods -----------------------------------------------------------
  // Views, copies, element-wise math, comparisons, reductions and matrix products: one method
  // per core op declared with `method = true` (core/ops/*.toml), generated with its typed
  // function (Note [One declaration per op]).
#include "qflow/core/ops/tensor_methods.h"

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
