// Comparisons eq, ne, lt, le, gt, ge (tensor and scalar forms, bool results) and where.
//
// Note [Comparing with a scalar]
// `tensor OP scalar` compares each element with the scalar in a type that holds both:
// floating tensors compare in their own dtype (the scalar rounded to it, like PyTorch);
// integer tensors compare in int64 against an integral scalar and in double against a
// floating one. PyTorch instead casts the scalar to the tensor's dtype, so
// `int8_tensor < 300` wraps 300 to 44; here it is true for every element, as in math.
#include <type_traits>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

constexpr const char* cmp_name(Cmp k) {
  switch (k) {
    case Cmp::Eq: return "eq";
    case Cmp::Ne: return "ne";
    case Cmp::Lt: return "lt";
    case Cmp::Le: return "le";
    case Cmp::Gt: return "gt";
    default: return "ge";
  }
}

template <Cmp K, typename T>
bool cmp_fn(T a, T b) {
  if constexpr (K == Cmp::Eq) return a == b;
  else if constexpr (K == Cmp::Ne) return a != b;
  else if constexpr (K == Cmp::Lt) return a < b;
  else if constexpr (K == Cmp::Le) return a <= b;
  else if constexpr (K == Cmp::Gt) return a > b;
  else return a >= b;
}

template <Cmp K>
std::vector<TensorMeta> cmp_meta(const OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  return one(broadcast_shapes(x.sizes(), y.sizes(), cmp_name(K)), DType::Bool);
}

// z = x OP y, broadcast; both operands are promoted to their common dtype first.
template <Cmp K>
Stack cmp_kernel(OpArgs& a) {
  const TensorMeta m = cmp_meta<K>(a)[0];
  const DType common = promote_types(a.tensor("self").dtype(), a.tensor("other").dtype());
  const Tensor x = cast(a.tensor("self"), common);
  const Tensor y = cast(a.tensor("other"), common);
  Tensor z = new_tensor(m.sizes, DType::Bool);
  visit_dtype(common, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<bool, T, T>(z, x, broadcast_strides(x, m.sizes), y, broadcast_strides(y, m.sizes),
                            [](T p, T q) { return cmp_fn<K, T>(p, q); });
  });
  return out(z);
}

std::vector<TensorMeta> cmp_scalar_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), DType::Bool); }

// z = x OP s; see Note [Comparing with a scalar] for the type the comparison happens in.
template <Cmp K>
Stack cmp_scalar_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Scalar s = a.scalar("other");
  Tensor z = new_tensor(x.sizes(), DType::Bool);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T sv = s.to<T>();
      unary_loop<bool, T>(z, x, [sv](T v) { return cmp_fn<K, T>(v, sv); });
    } else if (s.is_integral()) {
      const int64_t sv = s.to_int();
      unary_loop<bool, T>(z, x, [sv](T v) { return cmp_fn<K, int64_t>(static_cast<int64_t>(v), sv); });
    } else {
      const double sv = s.to_double();
      unary_loop<bool, T>(z, x, [sv](T v) { return cmp_fn<K, double>(static_cast<double>(v), sv); });
    }
  });
  return out(z);
}

// ---- where ------------------------------------------------------------------------------------

std::vector<TensorMeta> where_meta(const OpArgs& a) {
  const Tensor& c = a.tensor("condition");
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  QFLOW_CHECK(c.dtype() == DType::Bool, "where: expected condition to be a bool tensor, got {}", c.dtype());
  const auto shape = broadcast_shapes(broadcast_shapes(c.sizes(), x.sizes(), "where"), y.sizes(), "where");
  return one(shape, promote_types(x.dtype(), y.dtype()));
}

// o[i] = mask[i] ? a(i) : b(i) over a contiguous row.
template <typename T, typename A, typename B>
void blend_row(T* o, const unsigned char* mask, int64_t n, const A& a, const B& b) {
  for (int64_t i = 0; i < n; ++i) {
    const T av = a(i), bv = b(i);
    o[i] = mask[i] ? av : bv;
  }
}

// z = c ? x : y; c: bool, x, y: promoted to a common dtype; all three broadcast to z's shape.
Stack where_kernel(OpArgs& a) {
  const TensorMeta m = where_meta(a)[0];
  const Tensor& c = a.tensor("condition");
  const Tensor x = cast(a.tensor("self"), m.dtype);
  const Tensor y = cast(a.tensor("other"), m.dtype);
  Tensor z = new_tensor(m.sizes, m.dtype);
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    LoopPlan<4> plan = make_loop_plan<4>(
        m.sizes, {z.strides(), broadcast_strides(c, m.sizes), broadcast_strides(x, m.sizes), broadcast_strides(y, m.sizes)});
    for_each_row<T, const bool, const T, const T>(
        plan, {z.data_ptr<T>(), c.data_ptr<bool>(), x.data_ptr<T>(), y.data_ptr<T>()},
        [](std::tuple<T*, const bool*, const T*, const T*> p, const std::array<int64_t, 4>& s, int64_t n) {
          // (Lambdas capture xp/yp by init-capture: clang before 16 cannot capture structured bindings.)
          auto [o, cp, xp, yp] = p;
          // SIMD blends: both branches are loaded unconditionally and the mask is read as
          // bytes (GCC 12 does not vectorise loads of bool; unsigned char may alias anything).
          // Contiguous rows and a broadcast scalar branch (the where(mask, g, 0) of many
          // backward formulas) get their own loops.
          const auto* mask = reinterpret_cast<const unsigned char*>(cp);
          if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {
            blend_row(o, mask, n, [xp = xp](int64_t i) { return xp[i]; }, [yp = yp](int64_t i) { return yp[i]; });
          } else if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 0) {
            const T b = *yp;
            blend_row(o, mask, n, [xp = xp](int64_t i) { return xp[i]; }, [b](int64_t) { return b; });
          } else if (s[0] == 1 && s[1] == 1 && s[2] == 0 && s[3] == 1) {
            const T a = *xp;
            blend_row(o, mask, n, [a](int64_t) { return a; }, [yp = yp](int64_t i) { return yp[i]; });
          } else {
            for (int64_t i = 0; i < n; ++i) o[i * s[0]] = mask[i * s[1]] ? xp[i * s[2]] : yp[i * s[3]];
          }
        });
  });
  return out(z);
}

}  // namespace
}  // namespace kernels

}  // namespace qflow

// The registration and typed functions of core/ops/compare.toml (Note [One declaration per op]).
#include "core/ops/compare.inc"
