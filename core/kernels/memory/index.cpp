// Joining and gathering along one dim: cat, stack, index_select, and index_add (the scatter
// that differentiates index_select).
//
// All four see their tensors as (outer, n, inner) around the chosen dim: `outer` is the
// product of the sizes before it, `inner` of the sizes after it. For contiguous operands of
// the output's dtype a block along the dim is `inner` (or `n * inner`) contiguous elements, so
// the kernels copy whole rows with memcpy; anything else goes through the strided,
// dtype-converting copy of copy.cpp.
#include <algorithm>
#include <cstring>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow {
namespace kernels {
namespace {

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

// (outer, n, inner) around `dim`; a 0-d tensor is one element at dim 0.
Split split_at(const std::vector<int64_t>& sizes, int64_t dim) {
  Split s;
  if (sizes.empty()) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= sizes[d];
  s.n = sizes[dim];
  for (size_t d = static_cast<size_t>(dim) + 1; d < sizes.size(); ++d) s.inner *= sizes[d];
  return s;
}

// Copies `rows` rows of `row_bytes` bytes between buffers whose rows lie `dst_pitch` and
// `src_pitch` bytes apart. The work is split over the total byte count, not over rows, so
// both many short rows (cat along the last dim) and one huge row (cat along dim 0) spread
// across threads.
void copy_rows(char* dst, int64_t dst_pitch, const char* src, int64_t src_pitch, int64_t rows, int64_t row_bytes) {
  if (rows == 0 || row_bytes == 0) return;
  constexpr int64_t kGrainBytes = kParallelGrain * 8;
  parallel_for(rows * row_bytes, kGrainBytes, [&](int64_t b, int64_t e) {
    int64_t r = b / row_bytes, c = b % row_bytes;
    for (int64_t pos = b; pos < e; ++r, c = 0) {
      const int64_t len = std::min(row_bytes - c, e - pos);
      std::memcpy(dst + r * dst_pitch + c, src + r * src_pitch + c, static_cast<size_t>(len));
      pos += len;
    }
  });
}

// ---- cat / stack ----------------------------------------------------------------------------

// PyTorch still accepts 1-d empty tensors as "nothing" in any cat (a legacy placeholder).
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

struct CatPlan {
  std::vector<int64_t> sizes;
  DType dtype = DType::Float32;
  int64_t dim = 0;
  const Tensor* ref = nullptr;  // first tensor that is not skipped; null when all are
};

// Result shape and dtype (promoted over all inputs, like PyTorch); errors name the op, the
// shapes, the positions and the dim.
CatPlan cat_plan(const TensorList& ts, int64_t dim, const char* op) {
  QFLOW_CHECK(!ts.empty(), "{}: expected a non-empty list of tensors", op);
  CatPlan p;
  p.dtype = ts[0].dtype();
  for (const Tensor& t : ts) p.dtype = promote_types(p.dtype, t.dtype());
  size_t ref_i = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    QFLOW_CHECK(ts[i].dim() > 0, "{}: zero-dimensional tensor (at position {}) cannot be concatenated", op, i);
    if (!p.ref && !skipped_in_cat(ts[i])) {
      p.ref = &ts[i];
      ref_i = i;
    }
  }
  if (!p.ref) {  // only (0,)-shaped tensors
    p.sizes = {0};
    p.dim = wrap_dim(dim, 1, op);
    return p;
  }
  const Tensor& ref = *p.ref;
  p.dim = wrap_dim(dim, ref.dim(), op);
  p.sizes = ref.sizes();
  p.sizes[p.dim] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (skipped_in_cat(t)) continue;
    QFLOW_CHECK(t.dim() == ref.dim(),
                "{}: tensors must have the same number of dimensions: tensor {} has shape {} but tensor {} has shape {}",
                op, ref_i, ref.sizes(), i, t.sizes());
    for (int64_t d = 0; d < t.dim(); ++d) {
      QFLOW_CHECK(d == p.dim || t.sizes()[d] == ref.sizes()[d],
                  "{}: sizes of tensors must match except in dimension {}: tensor {} has shape {} but tensor {} has "
                  "shape {} (dimension {}: {} vs {})",
                  op, p.dim, ref_i, ref.sizes(), i, t.sizes(), d, ref.sizes()[d], t.sizes()[d]);
    }
    p.sizes[p.dim] += t.sizes()[p.dim];
  }
  return p;
}

std::vector<TensorMeta> cat_meta(const OpArgs& a) {
  CatPlan p = cat_plan(a.tensor_list("tensors"), a.to_int("dim"), "cat");
  return one(std::move(p.sizes), p.dtype);
}

// out: (outer, sum_i n_i, inner); input i: (outer, n_i, inner), written at column sum_{j<i} n_j.
Tensor cat_into_new(const TensorList& ts, const CatPlan& p) {
  Tensor o = new_tensor(p.sizes, p.dtype);
  if (o.numel() == 0) return o;
  const Split s = split_at(p.sizes, p.dim);
  const int64_t es = static_cast<int64_t>(element_size(p.dtype));
  char* base = static_cast<char*>(o.raw_data());
  int64_t offset = 0;  // along dim
  for (const Tensor& t : ts) {
    if (skipped_in_cat(t)) continue;
    const int64_t n = t.sizes()[p.dim];
    if (t.numel() > 0) {
      if (t.is_contiguous() && t.dtype() == p.dtype) {
        copy_rows(base + offset * s.inner * es, s.n * s.inner * es, static_cast<const char*>(t.raw_data()),
                  n * s.inner * es, s.outer, n * s.inner * es);
      } else {
        copy_tensor(make_view(o, t.sizes(), o.strides(), offset * o.strides()[p.dim]), t);
      }
    }
    offset += n;
  }
  return o;
}

Stack cat_kernel(OpArgs& a) {
  const TensorList& ts = a.tensor_list("tensors");
  return out(cat_into_new(ts, cat_plan(ts, a.to_int("dim"), "cat")));
}

// stack = cat of the inputs unsqueezed at `dim`, after checking that all shapes are equal.
int64_t stack_dim(const TensorList& ts, int64_t dim) {
  QFLOW_CHECK(!ts.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < ts.size(); ++i) {
    QFLOW_CHECK(ts[i].sizes() == ts[0].sizes(), "stack: expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
                ts[0].sizes(), ts[i].sizes(), i);
  }
  return wrap_dim(dim, ts[0].dim() + 1, "stack");
}

std::vector<TensorMeta> stack_meta(const OpArgs& a) {
  const TensorList& ts = a.tensor_list("tensors");
  const int64_t dim = stack_dim(ts, a.to_int("dim"));
  std::vector<int64_t> sizes = ts[0].sizes();
  sizes.insert(sizes.begin() + dim, static_cast<int64_t>(ts.size()));
  DType dtype = ts[0].dtype();
  for (const Tensor& t : ts) dtype = promote_types(dtype, t.dtype());
  return one(std::move(sizes), dtype);
}

Stack stack_kernel(OpArgs& a) {
  const TensorList& ts = a.tensor_list("tensors");
  const int64_t dim = stack_dim(ts, a.to_int("dim"));
  TensorList views;
  views.reserve(ts.size());
  for (const Tensor& t : ts) views.push_back(unsqueeze(t, dim));
  return out(cat_into_new(views, cat_plan(views, dim, "stack")));
}

// ---- index_select / index_add ---------------------------------------------------------------

// The index as a contiguous int64 tensor, after the checks every indexing op shares.
Tensor checked_index(const Tensor& index, const char* op) {
  QFLOW_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
              "{}: expected dtype int32 or int64 for index, got {}", op, index.dtype());
  QFLOW_CHECK(index.dim() <= 1, "{}: index must be a vector (0-d or 1-d), got shape {}", op, index.sizes());
  return contiguous(cast(index, DType::Int64));
}

void check_index_range(const int64_t* idx, int64_t n, int64_t size, int64_t dim, const char* op) {
  for (int64_t j = 0; j < n; ++j) {
    QFLOW_CHECK(idx[j] >= 0 && idx[j] < size, "{}: index {} (at position {}) is out of range for dimension {} of size {}",
                op, idx[j], j, dim, size);
  }
}

std::vector<TensorMeta> index_select_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& index = a.tensor("index");
  const int64_t dim = wrap_dim(a.to_int("dim"), x.dim(), "index_select");
  QFLOW_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
              "index_select: expected dtype int32 or int64 for index, got {}", index.dtype());
  QFLOW_CHECK(index.dim() <= 1, "index_select: index must be a vector (0-d or 1-d), got shape {}", index.sizes());
  std::vector<int64_t> sizes = x.sizes();
  if (x.dim() == 0) {
    QFLOW_CHECK(index.numel() == 1, "index_select: a 0-d tensor takes exactly one index, got {}", index.numel());
  } else {
    sizes[dim] = index.numel();
  }
  return one(std::move(sizes), x.dtype());
}

// x: (outer, size, inner), index: (n,) → out: (outer, n, inner); out[o, j] = x[o, index[j]].
Stack index_select_kernel(OpArgs& a) {
  const Tensor x = contiguous(a.tensor("self"));
  const int64_t dim = wrap_dim(a.to_int("dim"), x.dim(), "index_select");
  const Tensor index = checked_index(a.tensor("index"), "index_select");
  const TensorMeta m = index_select_meta(a)[0];
  Tensor o = new_tensor(m.sizes, m.dtype);
  const Split s = split_at(x.sizes(), dim);
  const int64_t n = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  check_index_range(idx, n, s.n, dim, "index_select");
  if (o.numel() == 0) return out(o);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = x.data_ptr<T>();
    T* dst = o.data_ptr<T>();
    const int64_t inner = s.inner, size = s.n;
    // One output row (o, j) per iteration; rows are disjoint, so threads never collide.
    parallel_for(s.outer * n, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t oi = r / n, j = r % n;
        const T* from = src + (oi * size + idx[j]) * inner;
        T* to = dst + r * inner;
        if (inner == 1) *to = *from;
        else std::memcpy(to, from, static_cast<size_t>(inner) * sizeof(T));
      }
    });
  });
  return out(o);
}

void check_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  QFLOW_CHECK(self.dtype() == source.dtype(), "index_add: self ({}) and source ({}) must have the same dtype", self.dtype(),
              source.dtype());
  QFLOW_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
              "index_add: expected dtype int32 or int64 for index, got {}", index.dtype());
  QFLOW_CHECK(index.dim() <= 1, "index_add: index must be a vector (0-d or 1-d), got shape {}", index.sizes());
  QFLOW_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(source.dim(), 1),
              "index_add: self of shape {} and source of shape {} must have the same number of dimensions", self.sizes(),
              source.sizes());
  const int64_t src_n = source.dim() == 0 ? 1 : source.sizes()[dim];
  QFLOW_CHECK(index.numel() == src_n,
              "index_add: number of indices ({}) must equal source.size({}) = {} (source shape {})", index.numel(), dim,
              src_n, source.sizes());
  for (int64_t d = 0; d < self.dim() && source.dim() > 0; ++d) {
    QFLOW_CHECK(d == dim || self.sizes()[d] == source.sizes()[d],
                "index_add: self of shape {} and source of shape {} must match except in dimension {} (dimension {}: {} "
                "vs {})",
                self.sizes(), source.sizes(), dim, d, self.sizes()[d], source.sizes()[d]);
  }
}

std::vector<TensorMeta> index_add_meta(const OpArgs& a) {
  const Tensor& self = a.tensor("self");
  const int64_t dim = wrap_dim(a.to_int("dim"), self.dim(), "index_add");
  check_index_add(self, dim, a.tensor("index"), a.tensor("source"));
  return one(self.sizes(), self.dtype());
}

// self: (outer, size, inner), index: (n,), source: (outer, n, inner) →
// out = self with out[o, index[j]] += alpha * source[o, j] (repeated indices accumulate).
Stack index_add_kernel(OpArgs& a) {
  const TensorMeta m = index_add_meta(a)[0];
  const Tensor& self = a.tensor("self");
  const int64_t dim = wrap_dim(a.to_int("dim"), self.dim(), "index_add");
  const Tensor index = checked_index(a.tensor("index"), "index_add");
  const Tensor source = contiguous(a.tensor("source"));
  Tensor o = new_tensor(m.sizes, m.dtype);
  copy_tensor(o, self);
  const Split s = split_at(self.sizes(), dim);
  const int64_t n = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  check_index_range(idx, n, s.n, dim, "index_add");
  if (o.numel() == 0 || n == 0) return out(o);
  visit_dtype(o.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T alpha = a.scalar("alpha").to<T>();
    const T* src = source.data_ptr<T>();
    T* dst = o.data_ptr<T>();
    const int64_t inner = s.inner, size = s.n;
    // Threads own disjoint columns (o, k) of the (outer, inner) plane and walk all n source
    // rows for them, so repeated indices never race; the k loop is contiguous.
    parallel_for(s.outer * inner, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e;) {
        const int64_t oi = c / inner, k0 = c % inner, k1 = std::min(inner, k0 + (e - c));
        for (int64_t j = 0; j < n; ++j) {
          T* to = dst + (oi * size + idx[j]) * inner;
          const T* from = src + (oi * n + j) * inner;
          if constexpr (std::is_same_v<T, bool>) {
            for (int64_t k = k0; k < k1; ++k) to[k] = to[k] || (alpha && from[k]);
          } else {
            for (int64_t k = k0; k < k1; ++k) to[k] = static_cast<T>(to[k] + alpha * from[k]);
          }
        }
        c += k1 - k0;
      }
    });
  });
  return out(o);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/index.toml (Note [One declaration per op]).
#include "core/ops/index.inc"
