#include "kernels/common/kernel_utils.h"

#include <algorithm>

#include "qflow/core/dispatch.h"
#include "qflow/core/opaque_tensor.h"
#include "qflow/core/ops.h"

namespace qflow::kernels {

Tensor new_tensor(const std::vector<int64_t>& sizes, DType dtype) {
  const int64_t n = checked_numel(sizes, "empty");
  auto storage = Storage::allocate(static_cast<size_t>(n) * element_size(dtype));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

Tensor new_opaque_like(const Tensor& like) { return empty_opaque_like(like); }

void make_plain_args(const Stack& args) {
  for (const Value& v : args) {
    if (v.is_tensor() && v.tensor().defined()) v.tensor().impl()->make_plain();
    if (v.is_tensor_list())
      for (const Tensor& t : v.tensor_list())
        if (t.defined()) t.impl()->make_plain();
  }
}

Tensor make_view(const Tensor& base, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(base.impl()->storage(), std::move(sizes), std::move(strides), offset, base.dtype());
  impl->set_is_view(true);
  return Tensor(std::move(impl));
}

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  QFLOW_CHECK(dim >= -n && dim < n, "{}: dimension {} out of range for a {}-d tensor (expected in [{}, {}])", op, dim,
              ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t ndim, std::string_view op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, op);
    QFLOW_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "{}: dimension {} appears twice in {}", op, d, dims);
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    QFLOW_CHECK(da == db || da == 1 || db == 1,
                "{}: shapes {} and {} cannot be broadcast (dimension {}: {} vs {})", op, a, b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Tensor& t, const std::vector<int64_t>& sizes) {
  const auto& ts = t.sizes();
  const auto& st = t.strides();
  std::vector<int64_t> out(sizes.size(), 0);
  const size_t lead = sizes.size() - ts.size();
  for (size_t i = 0; i < ts.size(); ++i) out[lead + i] = ts[i] == 1 ? 0 : st[i];
  return out;
}

DType result_type(DType tensor, const Scalar& s) {
  if (s.is_floating() && !is_floating(tensor)) return DType::Float32;
  if (tensor == DType::Bool && s.kind() == Scalar::Kind::Int) return DType::Int64;
  return tensor;
}

Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : to_dtype(t, dtype); }

}  // namespace qflow::kernels
