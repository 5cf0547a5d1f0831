// Activations: hardtanh, relu6, hardswish, hardsigmoid, leaky_relu, silu and their backward ops.
// Element-wise over any layout (loops.h); float32 and float64. Declared in core/ops/activation.toml
// (Note [One declaration per op]): these are their kernels and shape rules, found by name.
#include <cmath>

#include "kernels/common/kernel_utils.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/nn_ops.h"

namespace qflow {
namespace kernels {
namespace {

std::vector<TensorMeta> floating_self_meta(const OpArgs& a, std::string_view op) {
  const Tensor& x = a.tensor("self");
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a floating point tensor, got {}", op, x.dtype());
  return one(x.sizes(), x.dtype());
}

// y = f(x) with f built from the op's scalar arguments by make_f(T-tag).
template <typename MakeF>
Stack unary_kernel(const OpArgs& a, std::string_view op, const MakeF& make_f) {
  const Tensor& x = a.tensor("self");
  floating_self_meta(a, op);
  Tensor y = new_tensor(x.sizes(), x.dtype());
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_loop<T, T>(y, x, make_f(tag));
  });
  return out(y);
}

// dx = f(dy, x); both of x's shape.
template <typename MakeF>
Stack backward_kernel(const OpArgs& a, std::string_view op, const MakeF& make_f) {
  const Tensor& g = a.tensor("grad_output");
  const Tensor& x = a.tensor("self");
  QFLOW_CHECK(g.sizes() == x.sizes(), "{}: grad_output has shape {}, expected self's shape {}", op, g.sizes(), x.sizes());
  QFLOW_CHECK(g.dtype() == x.dtype(), "{}: grad_output has dtype {}, expected self's dtype {}", op, g.dtype(), x.dtype());
  Tensor dx = new_tensor(x.sizes(), x.dtype());
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T, T>(dx, g, g.strides(), x, x.strides(), make_f(tag));
  });
  return out(dx);
}

template <typename T> T clip(T v, T lo, T hi) { return v < lo ? lo : (v > hi ? hi : v); }

// 1 / (1 + e^-x) without overflow: e = e^-|x| <= 1 (sigmoid's form in unary.cpp, and the
// GPU's in cuda/kernels/pointwise.cu).
template <typename T> T stable_sigmoid(T v) {
  const T e = std::exp(-std::abs(v));
  return v >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

}  // namespace

std::vector<TensorMeta> hardtanh_meta(const OpArgs& a) { return floating_self_meta(a, "hardtanh"); }
std::vector<TensorMeta> relu6_meta(const OpArgs& a) { return floating_self_meta(a, "relu6"); }
std::vector<TensorMeta> hardswish_meta(const OpArgs& a) { return floating_self_meta(a, "hardswish"); }
std::vector<TensorMeta> hardsigmoid_meta(const OpArgs& a) { return floating_self_meta(a, "hardsigmoid"); }
std::vector<TensorMeta> leaky_relu_meta(const OpArgs& a) { return floating_self_meta(a, "leaky_relu"); }
std::vector<TensorMeta> silu_meta(const OpArgs& a) { return floating_self_meta(a, "silu"); }
std::vector<TensorMeta> activation_grad_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), a.tensor("self").dtype()); }

Stack hardtanh_kernel(OpArgs& a) {
  QFLOW_CHECK(a.to_double("min_val") <= a.to_double("max_val"),
              "hardtanh: min_val ({}) cannot be greater than max_val ({})", a.to_double("min_val"),
              a.to_double("max_val"));
  return unary_kernel(a, "hardtanh", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lo = static_cast<T>(a.to_double("min_val")), hi = static_cast<T>(a.to_double("max_val"));
    return [lo, hi](T v) { return clip(v, lo, hi); };
  });
}

Stack relu6_kernel(OpArgs& a) {
  return unary_kernel(a, "relu6", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T v) { return clip(v, T(0), T(6)); };
  });
}

// x * relu6(x + 3) / 6
Stack hardswish_kernel(OpArgs& a) {
  return unary_kernel(a, "hardswish", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T v) { return v * clip(v + T(3), T(0), T(6)) / T(6); };
  });
}

// relu6(x + 3) / 6, as PyTorch computes it (so the float32 results match bit for bit).
Stack hardsigmoid_kernel(OpArgs& a) {
  return unary_kernel(a, "hardsigmoid", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T v) { return clip(v + T(3), T(0), T(6)) / T(6); };
  });
}

Stack leaky_relu_kernel(OpArgs& a) {
  return unary_kernel(a, "leaky_relu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T slope = static_cast<T>(a.to_double("negative_slope"));
    return [slope](T v) { return v > T(0) ? v : v * slope; };
  });
}

Stack silu_kernel(OpArgs& a) {
  return unary_kernel(a, "silu", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T v) { return v * stable_sigmoid(v); };
  });
}

// The gradient flows only strictly inside (min_val, max_val), as in PyTorch (so relu6 has
// zero gradient at exactly 0 and 6).
Stack hardtanh_backward_kernel(OpArgs& a) {
  return backward_kernel(a, "hardtanh_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lo = static_cast<T>(a.to_double("min_val")), hi = static_cast<T>(a.to_double("max_val"));
    return [lo, hi](T g, T v) { return (v > lo && v < hi) ? g : T(0); };
  });
}

// d hardswish / dx: 0 below -3, x / 3 + 1/2 on [-3, 3], 1 above (PyTorch 1.13's branches).
Stack hardswish_backward_kernel(OpArgs& a) {
  return backward_kernel(a, "hardswish_backward", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T g, T v) { return v < T(-3) ? T(0) : (v <= T(3) ? g * (v / T(3) + T(0.5)) : g); };
  });
}

// d hardsigmoid / dx: 1/6 strictly inside (-3, 3), 0 elsewhere (PyTorch's branches).
Stack hardsigmoid_backward_kernel(OpArgs& a) {
  return backward_kernel(a, "hardsigmoid_backward", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T g, T v) { return (v > T(-3) && v < T(3)) ? g / T(6) : T(0); };
  });
}

Stack leaky_relu_backward_kernel(OpArgs& a) {
  return backward_kernel(a, "leaky_relu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T slope = static_cast<T>(a.to_double("negative_slope"));
    return [slope](T g, T v) { return v > T(0) ? g : g * slope; };
  });
}

// d silu / dx = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x) (PyTorch's form).
Stack silu_backward_kernel(OpArgs& a) {
  return backward_kernel(a, "silu_backward", [](auto tag) {
    using T = typename decltype(tag)::type;
    return [](T g, T v) {
      const T s = stable_sigmoid(v);
      return g * s * (T(1) + v * (T(1) - s));
    };
  });
}

}  // namespace kernels
}  // namespace qflow

// The registration and typed functions of core/ops/activation.toml (Note [One declaration per op]).
#include "core/ops/activation.inc"
