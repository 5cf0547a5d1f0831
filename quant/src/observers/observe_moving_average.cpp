// The observe_moving_average_ op: a moving-average observer's whole update — the batch's
// range, the symmetric widening, the average with the stored range (the first batch seeds it),
// the frozen flag and the count — as one op, so that on a GPU it is two kernel launches instead
// of the twenty-odd element-wise ops it is written as here (cuda/kernels/quantize_ops.cpp).
// Note [Observers stay on their device]. The CPU kernel is that sequence of ops, so the CPU's
// numbers are the composite's.
#include "qflow/autograd/derivatives.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/op_registry.h"
#include "qflow/core/ops.h"
#include "moving_average_update.h"
#include "qflow/quant/observer.h"
#include "qflow/quant/qparams.h"

namespace qflow::quant {
namespace {

std::vector<TensorMeta> observe_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& lo = a.tensor("min_val");
  const Tensor& hi = a.tensor("max_val");
  QFLOW_CHECK(x.is_floating_point() && x.numel() > 0,
              "observe_moving_average_: expected a non-empty floating point tensor, got {} {}", x.sizes(), x.dtype());
  QFLOW_CHECK(lo.numel() == 1 && hi.numel() == 1 && lo.is_floating_point() && hi.dtype() == lo.dtype(),
              "observe_moving_average_: min_val and max_val must be one floating point element each, got {} {} and {} {}",
              lo.sizes(), lo.dtype(), hi.sizes(), hi.dtype());
  QFLOW_CHECK(a.tensor("num_batches_tracked").dtype() == DType::Int64 && a.tensor("frozen").dtype() == DType::Bool,
              "observe_moving_average_: num_batches_tracked must be int64 and frozen bool");
  const double m = a.to_double("momentum");
  QFLOW_CHECK(m >= 0.0 && m <= 1.0, "observe_moving_average_: momentum must be in [0, 1], got {}", m);
  return {};
}

Stack observe_moving_average_kernel(OpArgs& a) {
  (void)observe_meta(a);
  detail::moving_average_update(tensor_range(a.tensor("self"), false), a.tensor("min_val"), a.tensor("max_val"),
                                a.tensor("num_batches_tracked"), a.tensor("frozen"),
                                static_cast<float>(a.to_double("momentum")), a.to_bool("symmetric"));
  return {};
}

}  // namespace

void observe_moving_average_(const Tensor& x, const Tensor& min_val, const Tensor& max_val,
                             const Tensor& num_batches_tracked, const Tensor& frozen, float momentum, bool symmetric) {
  static const OpHandle op("observe_moving_average_");
  (void)call(op, {{"self", x}, {"min_val", min_val}, {"max_val", max_val}, {"num_batches_tracked", num_batches_tracked},
                  {"frozen", frozen}, {"momentum", static_cast<double>(momentum)}, {"symmetric", symmetric}});
}

}  // namespace qflow::quant

// The registration of quant/ops/observe_moving_average.toml (Note [One declaration per op]).
#include "quant/ops/observe_moving_average.inc"

#include "quant/src/observers/observe_moving_average.derivatives.inc"
