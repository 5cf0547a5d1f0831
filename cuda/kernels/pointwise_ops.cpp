// CUDA kernels of the element-wise ops (Note [CUDA kernel files]): arithmetic (add, sub, mul,
// div, their scalar, reflected and in-place forms), add_relu, pow, minimum, maximum, the unary
// math of unary.cpp, relu/clamp/threshold_backward, the activations of activation.cpp and
// their gradients, comparisons and where, native_dropout and its backward, rand_like and
// randn_like. Each kernel runs the CPU op's shape rule (same checks, errors, sizes and dtypes),
// converts operands to the computation dtype with the "to" op where they differ, allocates
// its output in an operand's layout (channels-last stays channels-last) and launches one
// strided.cuh loop on the device's stream.
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "kernels/pointwise.cuh"
#include "kernels/tensor_geometry.h"
#include "qflow/core/factory.h"
#include "qflow/core/generator.h"
#include "qflow/core/nn_ops.h"

namespace qflow::cuda {
namespace {

Stack one_out(Tensor t) { return Stack{Value(std::move(t))}; }

// ---- arithmetic ---------------------------------------------------------------------------------

constexpr const char* binary_name(BinaryOp k) {
  switch (k) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::AddRelu: return "add_relu";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::ThresholdBackward: return "threshold_backward";
    case BinaryOp::HardtanhBackward: return "hardtanh_backward";
    case BinaryOp::HardswishBackward: return "hardswish_backward";
    case BinaryOp::HardsigmoidBackward: return "hardsigmoid_backward";
    case BinaryOp::SiluBackward: return "silu_backward";
    default: return "leaky_relu_backward";
  }
}

// out = op(x, y) in out's dtype: x and y converted to it, broadcast to out's shape.
void binary_into(BinaryOp k, const Tensor& out, const Tensor& x, const Tensor& y, const Scalar& p0 = Scalar(1),
                 const Scalar& p1 = Scalar(0)) {
  const char* name = binary_name(k);
  if (out.dtype() == DType::Bool && (k == BinaryOp::Sub || k == BinaryOp::Div))
    QFLOW_FAIL("{}: not supported for bool tensors", name);
  check_cuda_dtype(binary_supports(k, scalar_type(out.dtype())), name, out, out.dtype());
  const Tensor xc = cast_to(x, out.dtype());
  const Tensor yc = cast_to(y, out.dtype());
  const StridedGeometry g = geometry_of(out, {&xc, &yc}, name);
  Launch launch(out);
  launch_binary(k, scalar_type(out.dtype()), g, device_ptr(out), device_ptr(xc), device_ptr(yc), scalar_arg(p0),
                scalar_arg(p1), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(name);
}

void check_alpha(BinaryOp k, DType out, const Scalar& alpha) {
  QFLOW_CHECK(is_floating(out) || alpha.is_integral(),
              "{}: for integral input tensors, argument alpha must not be a floating point number (got {})",
              binary_name(k), alpha);
}

Scalar alpha_of(const OpArgs& a) { return a.has("alpha") ? a.scalar("alpha") : Scalar(1); }

template <BinaryOp K>
constexpr const char* arith_op() {
  return binary_name(K);
}

template <BinaryOp K>
Stack arith_kernel(OpArgs& a) {
  static const OpHandle op(arith_op<K>());
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  const Scalar alpha = alpha_of(a);
  check_alpha(K, m.dtype, alpha);
  Tensor o = empty_for_result(m.sizes, m.dtype, x.device(), {&x, &y});
  binary_into(K, o, x, y, alpha);
  return one_out(o);
}

// PyTorch's can_cast (arithmetic.cpp): no floating into integral, no number into bool.
bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return from == DType::Bool || to != DType::Bool;
}

void check_inplace(const char* name, const Tensor& self, const std::vector<int64_t>& shape, DType result) {
  QFLOW_CHECK(shape == self.sizes(), "{}_: result of shape {} cannot be written into self of shape {}", name, shape,
              self.sizes());
  QFLOW_CHECK(can_cast(result, self.dtype()), "{}_: result dtype {} cannot be cast to self's dtype {}", name, result,
              self.dtype());
}

// self = self (op) alpha * other, computed in self's dtype (arithmetic.cpp's arith_into).
template <BinaryOp K>
Stack arith_inplace_kernel(OpArgs& a) {
  static const OpHandle op(arith_op<K>());
  Tensor& self = a.tensor("self");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  check_inplace(binary_name(K), self, m.sizes, m.dtype);
  const Scalar alpha = alpha_of(a);
  check_alpha(K, self.dtype(), alpha);
  // Reading other through different strides of the same memory would be order-dependent.
  Tensor other = a.tensor("other");
  if (other.impl()->storage() == self.impl()->storage() && !other.is_same(self) &&
      (other.strides() != self.strides() || other.storage_offset() != self.storage_offset()))
    other = clone(other);
  binary_into(K, self, self, other, alpha);
  self.impl()->storage()->bump_version();
  return one_out(self);
}

// ---- scalar forms ---------------------------------------------------------------------------------

// out = op(x, p0) in out's dtype, x converted to it.
void unary_into(UnaryOp k, const char* name, const Tensor& out, const Tensor& x, const Scalar& p0 = Scalar(0),
                const Scalar& p1 = Scalar(0)) {
  check_cuda_dtype(unary_supports(k, scalar_type(out.dtype())), name, out, out.dtype());
  const Tensor xc = cast_to(x, out.dtype());
  const StridedGeometry g = geometry_of(out, {&xc}, name);
  Launch launch(out);
  launch_unary(k, scalar_type(out.dtype()), g, device_ptr(out), device_ptr(xc), scalar_arg(p0), scalar_arg(p1),
               launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(name);
}

constexpr const char* scalar_op_name(UnaryOp k) {
  switch (k) {
    case UnaryOp::AddScalar: return "add";
    case UnaryOp::SubScalar: return "sub";
    case UnaryOp::MulScalar: return "mul";
    case UnaryOp::DivScalar: return "div";
    case UnaryOp::RSubScalar: return "rsub";
    default: return "rdiv";
  }
}

constexpr const char* scalar_op_full_name(UnaryOp k) {
  switch (k) {
    case UnaryOp::AddScalar: return "add.Scalar";
    case UnaryOp::SubScalar: return "sub.Scalar";
    case UnaryOp::MulScalar: return "mul.Scalar";
    case UnaryOp::DivScalar: return "div.Scalar";
    case UnaryOp::RSubScalar: return "rsub";
    default: return "rdiv";
  }
}

void check_bool_scalar_op(UnaryOp k, DType t) {
  const bool bool_ok = k == UnaryOp::AddScalar || k == UnaryOp::MulScalar;
  QFLOW_CHECK(t != DType::Bool || bool_ok, "{}: not supported for bool tensors",
              k == UnaryOp::RSubScalar ? "sub" : (k == UnaryOp::RDivScalar ? "div" : scalar_op_name(k)));
}

// x (op) s and the reflected s (op) x, in the CPU rule's result dtype.
template <UnaryOp K>
Stack scalar_kernel(OpArgs& a) {
  static const OpHandle op(scalar_op_full_name(K));
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  check_bool_scalar_op(K, m.dtype);
  const Tensor& x = a.tensor("self");
  Tensor o = empty_like_layout(x, m.dtype);
  unary_into(K, scalar_op_name(K), o, x, a.scalar("other"));
  return one_out(o);
}

template <UnaryOp K>
Stack scalar_inplace_kernel(OpArgs& a) {
  static const OpHandle op(scalar_op_full_name(K));
  Tensor& self = a.tensor("self");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  check_inplace(scalar_op_name(K), self, m.sizes, m.dtype);
  check_bool_scalar_op(K, self.dtype());
  unary_into(K, scalar_op_name(K), self, self, a.scalar("other"));
  self.impl()->storage()->bump_version();
  return one_out(self);
}

// ---- add_relu, pow, minimum, maximum ------------------------------------------------------------

Stack add_relu_kernel(OpArgs& a) {
  static const OpHandle op("add_relu");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  Tensor o = empty_for_result(m.sizes, m.dtype, x.device(), {&x, &y});
  binary_into(BinaryOp::AddRelu, o, x, y);
  return one_out(o);
}

Stack pow_kernel(OpArgs& a) {
  static const OpHandle op("pow");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& e = a.tensor("exponent");
  Tensor o = empty_for_result(m.sizes, m.dtype, x.device(), {&x, &e});
  binary_into(BinaryOp::Pow, o, x, e);
  return one_out(o);
}
Stack minimum_kernel(OpArgs& a) {
  static const OpHandle op("minimum");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  Tensor o = empty_for_result(m.sizes, m.dtype, x.device(), {&x, &y});
  binary_into(BinaryOp::Minimum, o, x, y);
  return one_out(o);
}
Stack maximum_kernel(OpArgs& a) {
  static const OpHandle op("maximum");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const Tensor& y = a.tensor("other");
  Tensor o = empty_for_result(m.sizes, m.dtype, x.device(), {&x, &y});
  binary_into(BinaryOp::Maximum, o, x, y);
  return one_out(o);
}

// y = x ** e for a scalar e (binary_math.cpp's special exponents included).
Stack pow_scalar_kernel(OpArgs& a) {
  static const OpHandle op("pow.Scalar");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor o = empty_like_layout(x, m.dtype);
  unary_into(UnaryOp::PowScalar, "pow", o, x, a.scalar("exponent"));
  return one_out(o);
}

// ---- unary math -----------------------------------------------------------------------------------

template <UnaryOp K>
constexpr const char* unary_name() {
  switch (K) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sign: return "sign";
    case UnaryOp::Round: return "round";
    case UnaryOp::Floor: return "floor";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Clamp: return "clamp";
    case UnaryOp::Hardtanh: return "hardtanh";
    case UnaryOp::Relu6: return "relu6";
    case UnaryOp::Hardswish: return "hardswish";
    case UnaryOp::Hardsigmoid: return "hardsigmoid";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::LeakyRelu: return "leaky_relu";
    default: return "?";
  }
}

// y = f(x) in the rule's dtype (integer inputs of exp & co. become float32 first).
template <UnaryOp K>
Stack unary_kernel(OpArgs& a) {
  static const OpHandle op(unary_name<K>());
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  Tensor y = empty_like_layout(x, m.dtype);
  Scalar p0(0), p1(0);
  if constexpr (K == UnaryOp::Hardtanh) {
    QFLOW_CHECK(a.to_double("min_val") <= a.to_double("max_val"),
                "hardtanh: min_val ({}) cannot be greater than max_val ({})", a.to_double("min_val"),
                a.to_double("max_val"));
    p0 = Scalar(a.to_double("min_val"));
    p1 = Scalar(a.to_double("max_val"));
  } else if constexpr (K == UnaryOp::LeakyRelu) {
    p0 = Scalar(a.to_double("negative_slope"));
  }
  unary_into(K, unary_name<K>(), y, x, p0, p1);
  return one_out(y);
}

Stack relu_inplace_kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  QFLOW_CHECK(self.dtype() != DType::Bool, "{}: not supported for bool tensors", "relu_");
  unary_into(UnaryOp::Relu, "relu_", self, self);
  self.impl()->storage()->bump_version();
  return one_out(self);
}

// ---- clamp ------------------------------------------------------------------------------------------

// The bounds as the kernel's p0 (lower) and p1 (upper) in dtype t: an absent bound is -inf/+inf
// for floating types and the type's range end for integers (clamp.cpp's lower/upper_bound_of).
std::pair<Scalar, Scalar> clamp_bounds(const OpArgs& a, DType t, const char* op) {
  const std::optional<Scalar> lo = a.optional_scalar("min"), hi = a.optional_scalar("max");
  QFLOW_CHECK(lo || hi, "{}: at least one of 'min' or 'max' must not be None", op);
  return visit_dtype(t, [&](auto tag) -> std::pair<Scalar, Scalar> {
    using T = typename decltype(tag)::type;
    const T l = lo ? lo->to<T>()
                   : (std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                           : std::numeric_limits<T>::lowest());
    const T h = hi ? hi->to<T>()
                   : (std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                           : std::numeric_limits<T>::max());
    return {Scalar(l), Scalar(h)};
  });
}

Stack clamp_kernel(OpArgs& a) {
  static const OpHandle op("clamp");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x = a.tensor("self");
  const auto [lo, hi] = clamp_bounds(a, m.dtype, "clamp");
  Tensor y = empty_like_layout(x, m.dtype);
  unary_into(UnaryOp::Clamp, "clamp", y, x, lo, hi);
  return one_out(y);
}

Stack clamp_inplace_kernel(OpArgs& a) {
  static const OpHandle op("clamp");
  Tensor& self = a.tensor("self");
  const DType result = cpu_shape_rule(op, a)[0].dtype;
  QFLOW_CHECK(result == self.dtype(), "clamp_: result dtype {} cannot be cast to self's dtype {}", result, self.dtype());
  const auto [lo, hi] = clamp_bounds(a, self.dtype(), "clamp_");
  unary_into(UnaryOp::Clamp, "clamp_", self, self, lo, hi);
  self.impl()->storage()->bump_version();
  return one_out(self);
}

// ---- gradients of the activations -----------------------------------------------------------------

Stack threshold_backward_kernel(OpArgs& a) {
  static const OpHandle op("threshold_backward");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& g = a.tensor("grad_output");
  const Tensor& y = a.tensor("self");
  Tensor gx = empty_for_result(m.sizes, m.dtype, g.device(), {&y, &g});
  binary_into(BinaryOp::ThresholdBackward, gx, g, y, a.scalar("threshold"));
  return one_out(gx);
}

template <BinaryOp K>
Stack activation_backward_kernel(OpArgs& a) {
  const char* name = binary_name(K);
  const Tensor& g = a.tensor("grad_output");
  const Tensor& x = a.tensor("self");
  QFLOW_CHECK(g.sizes() == x.sizes(), "{}: grad_output has shape {}, expected self's shape {}", name, g.sizes(),
              x.sizes());
  QFLOW_CHECK(g.dtype() == x.dtype(), "{}: grad_output has dtype {}, expected self's dtype {}", name, g.dtype(),
              x.dtype());
  QFLOW_CHECK(is_floating(x.dtype()), "{}: expected a floating point tensor, got {}", name, x.dtype());
  Scalar p0(0), p1(0);
  if constexpr (K == BinaryOp::HardtanhBackward) {
    p0 = Scalar(a.to_double("min_val"));
    p1 = Scalar(a.to_double("max_val"));
  } else if constexpr (K == BinaryOp::LeakyReluBackward) {
    p0 = Scalar(a.to_double("negative_slope"));
  }
  Tensor dx = empty_for_result(x.sizes(), x.dtype(), x.device(), {&x, &g});
  binary_into(K, dx, g, x, p0, p1);
  return one_out(dx);
}

// ---- comparisons and where ----------------------------------------------------------------------

template <CompareOp K>
constexpr const char* compare_name() {
  switch (K) {
    case CompareOp::Eq: return "eq";
    case CompareOp::Ne: return "ne";
    case CompareOp::Lt: return "lt";
    case CompareOp::Le: return "le";
    case CompareOp::Gt: return "gt";
    default: return "ge";
  }
}

// z = x OP y, broadcast, both promoted to their common dtype first.
template <CompareOp K>
Stack compare_kernel(OpArgs& a) {
  static const OpHandle op(compare_name<K>());
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& x0 = a.tensor("self");
  const Tensor& y0 = a.tensor("other");
  const DType common = promote_types(x0.dtype(), y0.dtype());
  const Tensor x = cast_to(x0, common), y = cast_to(y0, common);
  Tensor z = empty_for_result(m.sizes, DType::Bool, x.device(), {&x0, &y0});
  const StridedGeometry g = geometry_of(z, {&x, &y}, compare_name<K>());
  Launch launch(z);
  launch_compare(K, scalar_type(common), g, device_ptr_as<bool>(z), device_ptr(x), device_ptr(y), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(compare_name<K>());
  return one_out(z);
}

template <CompareOp K>
Stack compare_scalar_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  Tensor z = empty_like_layout(x, DType::Bool);
  const StridedGeometry g = geometry_of(z, {&x}, compare_name<K>());
  Launch launch(z);
  launch_compare_scalar(K, scalar_type(x.dtype()), g, device_ptr_as<bool>(z), device_ptr(x), scalar_arg(a.scalar("other")),
                        launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(compare_name<K>());
  return one_out(z);
}

Stack where_kernel(OpArgs& a) {
  static const OpHandle op("where");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& c = a.tensor("condition");
  const Tensor& x0 = a.tensor("self");
  const Tensor& y0 = a.tensor("other");
  const Tensor x = cast_to(x0, m.dtype), y = cast_to(y0, m.dtype);
  Tensor z = empty_for_result(m.sizes, m.dtype, x.device(), {&x0, &y0, &c});
  const StridedGeometry g = geometry_of(z, {&c, &x, &y}, "where");
  Launch launch(z);
  launch_where(scalar_type(m.dtype), g, device_ptr(z), device_ptr_as<bool>(c), device_ptr(x), device_ptr(y),
               launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("where");
  return one_out(z);
}

// ---- dropout and random draws -----------------------------------------------------------------

// Reserves the Philox blocks of a draw of n elements of `dtype` from the current generator
// (the host-side state: no device work, Note [Counter-based draws on the GPU]).
PhiloxDraw reserve_draw(int64_t n, DType dtype, Device device) {
  check_not_capturing(device, "a random draw (dropout, rand_like)",
                      "its Philox offset is fixed when the kernel is recorded, so every replay would draw the same "
                      "numbers; run the model without dropout in the graph, or uncaptured");
  Generator& gen = current_generator();
  PhiloxDraw d;
  const auto key = gen.key();
  d.key0 = key[0];
  d.key1 = key[1];
  d.first_block = n == 0 ? gen.offset() : gen.reserve(philox_blocks(n, scalar_type(dtype)));
  return d;
}

// An all-true bool tensor of `sizes` on `device` backed by one element (dropout.cpp's all_true).
Tensor all_true(const std::vector<int64_t>& sizes, Device device) {
  Tensor one = full({1}, true, DType::Bool, device);
  auto impl = std::make_shared<TensorImpl>(one.impl()->storage(), sizes, std::vector<int64_t>(sizes.size(), 0), 0,
                                           DType::Bool);
  impl->set_is_view(true);
  return Tensor(std::move(impl));
}

Stack native_dropout_kernel(OpArgs& a) {
  static const OpHandle op("native_dropout");
  cpu_shape_rule(op, a);  // the CPU's checks: p in [0, 1], floating input
  const Tensor& input = a.tensor("input");
  const double p = a.to_double("p");
  const bool train = a.to_bool("train");
  if (!train || p == 0.0) return Stack{Value(input), Value(all_true(input.sizes(), input.device()))};
  if (p == 1.0)
    return Stack{Value(zeros(input.sizes(), input.dtype(), input.device())),
                 Value(zeros(input.sizes(), DType::Bool, input.device()))};
  // Dense inputs (channels-last included) are drawn in memory order; the output and the mask
  // share the input's layout, so memory position j of each is the same element.
  const Tensor x = is_dense(input) ? input : contiguous(input);
  Tensor y = empty_like_layout(x);
  Tensor mask = empty_like_layout(x, DType::Bool);
  const int64_t n = x.numel();
  const PhiloxDraw draw = reserve_draw(n, x.dtype(), x.device());
  Launch launch(x);
  launch_dropout(scalar_type(x.dtype()), n, device_ptr(y), device_ptr_as<bool>(mask), device_ptr(x), 1.0 - p,
                 1.0 / (1.0 - p), draw, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("native_dropout");
  return Stack{Value(y), Value(mask)};
}

Stack native_dropout_backward_kernel(OpArgs& a) {
  static const OpHandle op("native_dropout_backward");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& g = a.tensor("grad_output");
  const Tensor& mask = a.tensor("mask");
  Tensor dx = empty_for_result(m.sizes, m.dtype, g.device(), {&g, &mask});
  const StridedGeometry geo = geometry_of(dx, {&g, &mask}, "native_dropout_backward");
  Launch launch(dx);
  launch_masked_scale(scalar_type(m.dtype), geo, device_ptr(dx), device_ptr(g), device_ptr_as<bool>(mask),
                      a.to_double("scale"), launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("native_dropout_backward");
  return one_out(dx);
}

// rand_like / randn_like: row-major like the CPU's, drawn from the same Philox stream, so a
// seed gives the CPU's numbers (uniforms bit for bit; normals up to the last bit of the
// device's double log/cos/sin).
template <bool Normal>
Stack random_like_kernel(OpArgs& a) {
  static const OpHandle op(Normal ? "randn_like" : "rand_like");
  const TensorMeta m = cpu_shape_rule(op, a)[0];
  const Tensor& self = a.tensor("self");
  Tensor t = empty(m.sizes, m.dtype, self.device());
  const int64_t n = t.numel();
  const PhiloxDraw draw = reserve_draw(n, m.dtype, self.device());
  Launch launch(t);
  launch_random(scalar_type(m.dtype), Normal, device_ptr(t), n, draw, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH(Normal ? "randn_like" : "rand_like");
  return one_out(t);
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/pointwise_ops.cuda.inc"
