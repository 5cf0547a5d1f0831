// Planning of reductions: which dims are kept and reduced, collapsed. See Note [Reduction loops].
#include "kernels/reduction/reduce_loop.h"

#include <algorithm>
#include <numeric>

#include "kernels/common/kernel_utils.h"

namespace qflow::kernels {
namespace {

struct Dim {
  int64_t size, stride;
};

// Merges dim i+1 into dim i when one stride walks both; size-1 dims are gone already.
void collapse(const std::vector<Dim>& dims, std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  for (const Dim& d : dims) {
    if (!sizes.empty() && strides.back() == d.stride * d.size) {
      sizes.back() *= d.size;
      strides.back() = d.stride;
    } else {
      sizes.push_back(d.size);
      strides.push_back(d.stride);
    }
  }
  if (sizes.empty()) {  // nothing kept / nothing reduced: one position
    sizes.push_back(1);
    strides.push_back(0);
  }
}

}  // namespace

ReducePlan make_reduce_plan(const Tensor& x, const std::vector<int64_t>& dims, bool keep_order) {
  ReducePlan plan;
  std::vector<Dim> kept, reduced;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const Dim dim{x.sizes()[d], x.strides()[d]};
    const bool is_reduced = std::binary_search(dims.begin(), dims.end(), d);
    (is_reduced ? plan.reduce_numel : plan.num_outputs) *= dim.size;
    if (dim.size != 1) (is_reduced ? reduced : kept).push_back(dim);
  }
  // Smallest stride innermost, so rows walk memory as densely as the layout allows
  // (a transposed input is reduced along its contiguous dim).
  if (!keep_order)
    std::stable_sort(reduced.begin(), reduced.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  collapse(kept, plan.out_sizes, plan.out_strides);
  collapse(reduced, plan.red_sizes, plan.red_strides);
  return plan;
}

std::vector<int64_t> reduction_dims(const Tensor& x, const std::vector<int64_t>& dims, std::string_view op) {
  std::vector<int64_t> out = wrap_dims(dims, x.dim(), op);
  if (x.dim() == 0) out.clear();  // dim 0 / -1 of a scalar is the scalar itself
  return out;
}

std::vector<int64_t> reduced_shape(const std::vector<int64_t>& sizes, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const bool is_reduced = std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d));
    if (!is_reduced) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

}  // namespace qflow::kernels
