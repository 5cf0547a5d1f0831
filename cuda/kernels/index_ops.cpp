// CUDA kernels of index.cpp's ops: cat, stack (cat of unsqueezed views), index_select and
// index_add. Results are row-major like the CPU's. cat copies each contiguous input of the
// output's dtype with one 2-D cudaMemcpyAsync (outer rows of n_i * inner elements, pitched
// into the output) and any other input with the strided converting copy (copy_ops.cpp).
#include <vector>

#include "kernels/index.cuh"
#include "kernels/tensor_geometry.h"
#include "qflow/core/factory.h"

namespace qflow::cuda {
namespace {

Stack one_out(Tensor t) { return Stack{Value(std::move(t))}; }

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split split_at(const std::vector<int64_t>& sizes, int64_t dim) {
  Split s;
  if (sizes.empty()) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= sizes[static_cast<size_t>(d)];
  s.n = sizes[static_cast<size_t>(dim)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < sizes.size(); ++d) s.inner *= sizes[d];
  return s;
}

int64_t wrap(int64_t dim, int64_t ndim) {
  const int64_t n = ndim > 0 ? ndim : 1;
  return dim < 0 ? dim + n : dim;
}

// PyTorch still accepts 1-d empty tensors as "nothing" in any cat (index.cpp).
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

// out (sizes, dtype; row-major) = the inputs joined along `dim` (validated by the shape rule).
Tensor cat_into_new(const TensorList& ts, const std::vector<int64_t>& sizes, DType dtype, int64_t dim, Device device) {
  Tensor o = empty(sizes, dtype, device);
  if (o.numel() == 0) return o;
  const Split s = split_at(sizes, dim);
  const int64_t es = static_cast<int64_t>(element_size(dtype));
  char* base = static_cast<char*>(device_ptr(o));
  int64_t offset = 0;  // along dim
  for (const Tensor& t : ts) {
    if (skipped_in_cat(t)) continue;
    const int64_t n = t.sizes()[static_cast<size_t>(dim)];
    if (t.numel() > 0) {
      // cudaMemcpy2D refuses pitches above cudaDevAttrMaxPitch (2^31 - 1 bytes): one row is a
      // plain copy, longer rows take the strided kernel.
      const int64_t pitch = s.n * s.inner * es;
      if (t.is_contiguous() && t.dtype() == dtype && (s.outer == 1 || pitch <= int64_t{0x7FFFFFFF})) {
        Launch launch(o);
        const size_t row = static_cast<size_t>(n * s.inner * es);
        if (s.outer == 1)
          QFLOW_CUDA_CHECK(cudaMemcpyAsync(base + offset * s.inner * es, device_ptr(t), row, cudaMemcpyDeviceToDevice,
                                           launch.stream),
                           "cat");
        else
          QFLOW_CUDA_CHECK(cudaMemcpy2DAsync(base + offset * s.inner * es, static_cast<size_t>(pitch), device_ptr(t),
                                             row, row, static_cast<size_t>(s.outer), cudaMemcpyDeviceToDevice,
                                             launch.stream),
                           "cat");
      } else {
        auto view = std::make_shared<TensorImpl>(o.impl()->storage(), t.sizes(), o.strides(),
                                                 offset * o.strides()[static_cast<size_t>(dim)], dtype);
        copy_into(Tensor(std::move(view)), t);
      }
    }
    offset += n;
  }
  return o;
}

Stack cat_kernel(OpArgs& a) {
  static const OpHandle op("cat");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const TensorList& ts = a.tensor_list("tensors");
  const Tensor* ref = nullptr;
  for (const Tensor& t : ts)
    if (!ref && !skipped_in_cat(t)) ref = &t;
  const Device device = ts[0].device();
  if (!ref) return one_out(empty(m.sizes, m.dtype, device));
  return one_out(cat_into_new(ts, m.sizes, m.dtype, wrap(a.to_int("dim"), ref->dim()), device));
}

Stack stack_kernel(OpArgs& a) {
  static const OpHandle op("stack");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const TensorList& ts = a.tensor_list("tensors");
  const int64_t dim = wrap(a.to_int("dim"), ts[0].dim() + 1);
  TensorList views;
  views.reserve(ts.size());
  for (const Tensor& t : ts) views.push_back(unsqueeze(t, dim));
  return one_out(cat_into_new(views, m.sizes, m.dtype, dim, ts[0].device()));
}

// The index as a contiguous int64 tensor on its device.
Tensor int64_index(const Tensor& index) { return contiguous(cast_to(index, DType::Int64)); }

Stack index_select_kernel(OpArgs& a) {
  static const OpHandle op("index_select");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor x = contiguous(a.tensor("self"));
  const int64_t dim = wrap(a.to_int("dim"), x.dim());
  const Tensor index = int64_index(a.tensor("index"));
  Tensor o = empty(m.sizes, m.dtype, x.device());
  const Split s = split_at(x.sizes(), dim);
  Launch launch(o);
  launch_index_select(scalar_type(m.dtype), device_ptr(o), device_ptr(x), device_ptr_as<int64_t>(index), s.outer, s.n,
                      index.numel(), s.inner, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("index_select");
  return one_out(o);
}

Stack index_add_kernel(OpArgs& a) {
  static const OpHandle op("index_add");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& self = a.tensor("self");
  const int64_t dim = wrap(a.to_int("dim"), self.dim());
  const Tensor index = int64_index(a.tensor("index"));
  const Tensor source = contiguous(a.tensor("source"));
  Tensor o = empty(m.sizes, m.dtype, self.device());
  copy_into(o, self);
  const Split s = split_at(self.sizes(), dim);
  Launch launch(o);
  launch_index_add(scalar_type(m.dtype), device_ptr(o), device_ptr(source), device_ptr_as<int64_t>(index), s.outer, s.n,
                   index.numel(), s.inner, scalar_arg(a.scalar("alpha")), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("index_add");
  return one_out(o);
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/index_ops.cuda.inc"
