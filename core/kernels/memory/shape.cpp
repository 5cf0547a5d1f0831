// Views that share storage: view, reshape, permute, transpose, t, narrow, slice, select,
// squeeze, unsqueeze, expand, flatten. Each computes sizes/strides/offset; no data moves
// (reshape copies only when no view can express the result, like PyTorch).
#include <numeric>
#include <optional>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

struct Geometry {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

Geometry geometry_of(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset()}; }

Stack view_of(const Tensor& x, Geometry g) { return out(make_view(x, std::move(g.sizes), std::move(g.strides), g.offset)); }

// Resolves one -1 entry against numel; error names the op and both shapes.
std::vector<int64_t> infer_size(const std::vector<int64_t>& shape, int64_t numel, const char* op, const std::vector<int64_t>& from) {
  std::vector<int64_t> out = shape;
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      QFLOW_CHECK(!infer, "{}: only one dimension can be inferred (-1) in shape {}", op, shape);
      infer = i;
    } else {
      QFLOW_CHECK(out[i] >= 0, "{}: invalid dimension {} in shape {}", op, out[i], shape);
      known *= out[i];
    }
  }
  if (infer) {
    QFLOW_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape,
                from, numel);
    out[*infer] = numel / known;
  } else {
    QFLOW_CHECK(known == numel, "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape, from, numel);
  }
  return out;
}

// Strides that let a tensor with (sizes, strides) be seen as `shape` without copying,
// or nullopt (PyTorch's computeStride).
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size());
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return contiguous_strides(shape);
  if (sizes.empty()) return std::vector<int64_t>(shape.size(), 1);  // a 0-d tensor views as any all-ones shape
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// `shape_arg`: view names it size, reshape shape (as PyTorch does).
std::vector<int64_t> target_shape(const OpArgs& a, std::string_view shape_arg, const char* op) {
  const Tensor& x = a.tensor("self");
  return infer_size(hints(a[shape_arg].sym_int_list()), x.numel(), op, x.sizes());
}

std::vector<TensorMeta> view_meta(const OpArgs& a) {
  return one(target_shape(a, "size", "view"), a.tensor("self").dtype());
}
std::vector<TensorMeta> reshape_meta(const OpArgs& a) {
  return one(target_shape(a, "shape", "reshape"), a.tensor("self").dtype());
}

Stack view_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const auto shape = target_shape(a, "size", "view");
  auto strides = view_strides(x.sizes(), x.strides(), shape);
  QFLOW_CHECK(strides.has_value(),
              "view: shape {} is not compatible with the input's size {} and stride {} (at least one dimension spans "
              "across two contiguous subspaces); use reshape() instead",
              shape, x.sizes(), x.strides());
  return view_of(x, {shape, *strides, x.storage_offset()});
}

Stack reshape_to(const Tensor& x, const std::vector<int64_t>& shape) {
  if (auto strides = view_strides(x.sizes(), x.strides(), shape)) return view_of(x, {shape, *strides, x.storage_offset()});
  Tensor c = contiguous(x);
  return out(make_view(c, shape, contiguous_strides(shape), c.storage_offset()));
}

Stack reshape_kernel(OpArgs& a) { return reshape_to(a.tensor("self"), target_shape(a, "shape", "reshape")); }

Geometry permute_geometry(const Tensor& x, const std::vector<int64_t>& dims) {
  QFLOW_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: got {} dims {} for a {}-d tensor", dims.size(), dims,
              x.dim());
  const auto wrapped = wrap_dims(dims, x.dim(), "permute");  // also rejects repeats
  (void)wrapped;
  Geometry g{{}, {}, x.storage_offset()};
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.dim(), "permute");
    g.sizes.push_back(x.sizes()[w]);
    g.strides.push_back(x.strides()[w]);
  }
  return g;
}
std::vector<TensorMeta> permute_meta(const OpArgs& a) {
  return one(permute_geometry(a.tensor("self"), a.int_list("dims")).sizes, a.tensor("self").dtype());
}
Stack permute_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), permute_geometry(a.tensor("self"), a.int_list("dims")));
}

Geometry transpose_geometry(const Tensor& x, int64_t d0, int64_t d1) {
  Geometry g = geometry_of(x);
  if (x.dim() == 0) return g;
  d0 = wrap_dim(d0, x.dim(), "transpose");
  d1 = wrap_dim(d1, x.dim(), "transpose");
  std::swap(g.sizes[d0], g.sizes[d1]);
  std::swap(g.strides[d0], g.strides[d1]);
  return g;
}
std::vector<TensorMeta> transpose_meta(const OpArgs& a) {
  return one(transpose_geometry(a.tensor("self"), a.to_int("dim0"), a.to_int("dim1")).sizes, a.tensor("self").dtype());
}
Stack transpose_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), transpose_geometry(a.tensor("self"), a.to_int("dim0"), a.to_int("dim1")));
}

Geometry t_geometry(const Tensor& x) {
  QFLOW_CHECK(x.dim() <= 2, "t: expects a tensor with <= 2 dimensions, got shape {}", x.sizes());
  return x.dim() < 2 ? geometry_of(x) : transpose_geometry(x, 0, 1);
}
std::vector<TensorMeta> t_meta(const OpArgs& a) {
  return one(t_geometry(a.tensor("self")).sizes, a.tensor("self").dtype());
}
Stack t_kernel(OpArgs& a) { return view_of(a.tensor("self"), t_geometry(a.tensor("self"))); }

Geometry slice_geometry(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  QFLOW_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "slice");
  QFLOW_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const int64_t n = x.sizes()[dim];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t s = clampi(start.value_or(0));
  const int64_t e = std::max(s, clampi(end.value_or(n)));
  Geometry g = geometry_of(x);
  g.offset += s * g.strides[dim];
  g.sizes[dim] = (e - s + step - 1) / step;
  g.strides[dim] *= step;
  return g;
}
std::vector<TensorMeta> slice_meta(const OpArgs& a) {
  return one(slice_geometry(a.tensor("self"), a.to_int("dim"), a.optional_int("start"), a.optional_int("end"),
                            a.to_int("step"))
                 .sizes,
             a.tensor("self").dtype());
}
Stack slice_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), slice_geometry(a.tensor("self"), a.to_int("dim"), a.optional_int("start"),
                                                  a.optional_int("end"), a.to_int("step")));
}

Geometry narrow_geometry(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  QFLOW_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "narrow");
  const int64_t n = x.sizes()[dim];
  if (start < 0) start += n;
  QFLOW_CHECK(start >= 0 && length >= 0 && start + length <= n,
              "narrow: start {} + length {} exceeds dimension {} of size {} (shape {})", start, length, dim, n, x.sizes());
  Geometry g = geometry_of(x);
  g.offset += start * g.strides[dim];
  g.sizes[dim] = length;
  return g;
}
std::vector<TensorMeta> narrow_meta(const OpArgs& a) {
  return one(narrow_geometry(a.tensor("self"), a.to_int("dim"), a.to_int("start"), a.to_int("length")).sizes,
             a.tensor("self").dtype());
}
Stack narrow_kernel(OpArgs& a) {
  return view_of(a.tensor("self"),
                 narrow_geometry(a.tensor("self"), a.to_int("dim"), a.to_int("start"), a.to_int("length")));
}

Geometry select_geometry(const Tensor& x, int64_t dim, int64_t index) {
  QFLOW_CHECK(x.dim() > 0, "select: cannot select on a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  const int64_t n = x.sizes()[dim];
  QFLOW_CHECK(index >= -n && index < n, "select: index {} out of range for dimension {} of size {}", index, dim, n);
  if (index < 0) index += n;
  Geometry g = geometry_of(x);
  g.offset += index * g.strides[dim];
  g.sizes.erase(g.sizes.begin() + dim);
  g.strides.erase(g.strides.begin() + dim);
  return g;
}
std::vector<TensorMeta> select_meta(const OpArgs& a) {
  return one(select_geometry(a.tensor("self"), a.to_int("dim"), a.to_int("index")).sizes, a.tensor("self").dtype());
}
Stack select_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), select_geometry(a.tensor("self"), a.to_int("dim"), a.to_int("index")));
}

Geometry squeeze_geometry(const Tensor& x, std::optional<int64_t> dim) {
  Geometry g{{}, {}, x.storage_offset()};
  const int64_t only = dim ? wrap_dim(*dim, x.dim(), "squeeze") : -1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool drop = x.sizes()[d] == 1 && (only < 0 || d == only);
    if (drop) continue;
    g.sizes.push_back(x.sizes()[d]);
    g.strides.push_back(x.strides()[d]);
  }
  return g;
}
std::vector<TensorMeta> squeeze_meta(const OpArgs& a) {
  return one(squeeze_geometry(a.tensor("self"), std::nullopt).sizes, a.tensor("self").dtype());
}
Stack squeeze_kernel(OpArgs& a) { return view_of(a.tensor("self"), squeeze_geometry(a.tensor("self"), std::nullopt)); }
std::vector<TensorMeta> squeeze_dim_meta(const OpArgs& a) {
  return one(squeeze_geometry(a.tensor("self"), a.to_int("dim")).sizes, a.tensor("self").dtype());
}
Stack squeeze_dim_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), squeeze_geometry(a.tensor("self"), a.to_int("dim")));
}

Geometry unsqueeze_geometry(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Geometry g = geometry_of(x);
  const int64_t stride = dim < x.dim() ? g.sizes[dim] * g.strides[dim] : 1;
  g.sizes.insert(g.sizes.begin() + dim, 1);
  g.strides.insert(g.strides.begin() + dim, stride);
  return g;
}
std::vector<TensorMeta> unsqueeze_meta(const OpArgs& a) {
  return one(unsqueeze_geometry(a.tensor("self"), a.to_int("dim")).sizes, a.tensor("self").dtype());
}
Stack unsqueeze_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), unsqueeze_geometry(a.tensor("self"), a.to_int("dim")));
}

Geometry expand_geometry(const Tensor& x, const std::vector<int64_t>& shape) {
  QFLOW_CHECK(static_cast<int64_t>(shape.size()) >= x.dim(),
              "expand: the number of sizes provided ({}) must be at least the number of dimensions of the tensor ({})",
              shape.size(), x.dim());
  Geometry g{shape, std::vector<int64_t>(shape.size(), 0), x.storage_offset()};
  const size_t lead = shape.size() - static_cast<size_t>(x.dim());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      QFLOW_CHECK(shape[i] >= 0, "expand: size {} at a new leading dimension {} is invalid", shape[i], i);
      continue;
    }
    const int64_t have = x.sizes()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    QFLOW_CHECK(have == want || have == 1,
                "expand: the expanded size of the tensor ({}) must match the existing size ({}) at non-singleton "
                "dimension {} (target shape {}, tensor shape {})",
                want, have, i, shape, x.sizes());
    g.sizes[i] = want;
    g.strides[i] = have == want ? x.strides()[i - lead] : 0;
  }
  return g;
}
std::vector<TensorMeta> expand_meta(const OpArgs& a) {
  return one(expand_geometry(a.tensor("self"), hints(a["size"].sym_int_list())).sizes, a.tensor("self").dtype());
}
Stack expand_kernel(OpArgs& a) {
  return view_of(a.tensor("self"), expand_geometry(a.tensor("self"), a.int_list("size")));
}

std::vector<int64_t> flatten_shape(const Tensor& x, int64_t start, int64_t end) {
  if (x.dim() == 0) return {1};
  start = wrap_dim(start, x.dim(), "flatten");
  end = wrap_dim(end, x.dim(), "flatten");
  QFLOW_CHECK(start <= end, "flatten: start_dim {} must not come after end_dim {}", start, end);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= x.sizes()[d];
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes().begin() + end + 1, x.sizes().end());
  return shape;
}
std::vector<TensorMeta> flatten_meta(const OpArgs& a) {
  return one(flatten_shape(a.tensor("self"), a.to_int("start_dim"), a.to_int("end_dim")), a.tensor("self").dtype());
}
Stack flatten_kernel(OpArgs& a) {
  return reshape_to(a.tensor("self"), flatten_shape(a.tensor("self"), a.to_int("start_dim"), a.to_int("end_dim")));
}

}  // namespace
}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------
Tensor slice(const Tensor& x, int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) {
  QFLOW_OP_HANDLE("slice");
  return call_tensor(op, {{"self", x}, {"dim", d}, {"start", Value(s)}, {"end", Value(e)}, {"step", st}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/shape.toml (Note [One declaration per op]).
#include "core/ops/shape.inc"
