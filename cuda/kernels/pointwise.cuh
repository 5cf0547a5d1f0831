#pragma once
// Launchers of qflow's element-wise CUDA kernels (pointwise.cu), registered by
// pointwise_ops.cpp: unary math and activations, scalar arithmetic, broadcasting binary
// arithmetic and activation gradients, comparisons, where, dropout and the random fills.
// Operands are described by a StridedGeometry (strided.cuh; operand 0 is the output) and the
// launchers queue work on `stream` without synchronising.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/strided.cuh"

namespace qflow::cuda {

/// out = f(in), out and in of one dtype (operands: out, in).
enum class UnaryOp : int {
  Neg, Abs, Sign, Round, Floor,                 // every dtype (sign alone for bool)
  Exp, Log, Sqrt, Rsqrt, Sigmoid, Tanh,         // floating
  Relu, Clamp,                                  // every dtype but bool (clamp: p0 lower, p1 upper)
  Hardtanh, Relu6, Hardswish, Hardsigmoid,     // floating (hardtanh: p0 min, p1 max)
  LeakyRelu, Silu,                              // floating (leaky: p0 slope)
  AddScalar, SubScalar, MulScalar, DivScalar,   // x (op) p0; bool: add is or, mul is and
  RSubScalar, RDivScalar,                       // p0 (op) x
  PowScalar,                                    // x ** p0
};

/// out = f(a, b), all three of one dtype (operands: out, a, b).
enum class BinaryOp : int {
  Add, Sub,             // a +- p0 * b (p0: alpha); bool add is or
  Mul, Div,             // bool mul is and
  AddRelu,              // relu(a + b), floating
  Pow, Minimum, Maximum,
  ThresholdBackward,    // a: grad, b: output; b > p0 ? a : 0 (floating)
  HardtanhBackward,     // p0 < b < p1 ? a : 0 (floating)
  HardswishBackward,    // floating
  HardsigmoidBackward,  // -3 < b < 3 ? a / 6 : 0 (floating)
  LeakyReluBackward,    // b > 0 ? a : a * p0 (floating)
  SiluBackward,         // a: grad, b: input; a * s * (1 + b * (1 - s)), s = sigmoid(b) (floating)
};

enum class CompareOp : int { Eq, Ne, Lt, Le, Gt, Ge };

/// Which (op, dtype) pairs have a kernel; false means the registration must refuse the call.
bool unary_supports(UnaryOp op, ScalarType dtype);
bool binary_supports(BinaryOp op, ScalarType dtype);

void launch_unary(UnaryOp op, ScalarType dtype, const StridedGeometry& g, void* out, const void* in, ScalarArg p0,
                  ScalarArg p1, cudaStream_t stream);
void launch_binary(BinaryOp op, ScalarType dtype, const StridedGeometry& g, void* out, const void* a, const void* b,
                   ScalarArg p0, ScalarArg p1, cudaStream_t stream);
/// out (bool) = a (op) b, a and b of `dtype` (operands: out, a, b).
void launch_compare(CompareOp op, ScalarType dtype, const StridedGeometry& g, bool* out, const void* a, const void* b,
                    cudaStream_t stream);
/// out (bool) = a (op) s (Note [Comparing with a scalar] of core/kernels/elementwise/compare.cpp).
void launch_compare_scalar(CompareOp op, ScalarType dtype, const StridedGeometry& g, bool* out, const void* a,
                           ScalarArg s, cudaStream_t stream);
/// out = c ? a : b (operands: out, c, a, b; c bool; out, a, b of `dtype`).
void launch_where(ScalarType dtype, const StridedGeometry& g, void* out, const bool* c, const void* a, const void* b,
                  cudaStream_t stream);
/// out = mask ? grad * scale : 0 (operands: out, grad, mask), floating.
void launch_masked_scale(ScalarType dtype, const StridedGeometry& g, void* out, const void* grad, const bool* mask,
                         double scale, cudaStream_t stream);

/// Note [Counter-based draws on the GPU]
/// The same Philox 4x32-10 stream as the CPU's random.cpp: element i of a draw of n elements
/// comes from block first_block + i / per_block (4 float32 or 2 float64 elements a block),
/// lane i % per_block, with the key of the generator; the host reserves the blocks with
/// Generator::reserve, so a seed gives the same numbers on the GPU as on the CPU.
struct PhiloxDraw {
  uint32_t key0 = 0, key1 = 0;
  uint64_t first_block = 0;
};
/// The number of Philox blocks a draw of n elements of `dtype` consumes.
inline uint64_t philox_blocks(int64_t n, ScalarType dtype) {
  const int64_t per = dtype == ScalarType::Float64 ? 2 : 4;
  return static_cast<uint64_t>((n + per - 1) / per);
}
/// out[0, n): uniform [0, 1) (normal = false) or standard normal, float32 or float64, flat.
void launch_random(ScalarType dtype, bool normal, void* out, int64_t n, PhiloxDraw draw, cudaStream_t stream);
/// Dropout over n flat elements: element i is kept when its uniform draw u_i < 1 - p (the
/// CPU's rule), y = keep ? x * scale : 0, mask = keep.
void launch_dropout(ScalarType dtype, int64_t n, void* y, bool* mask, const void* x, double keep_prob, double scale,
                    PhiloxDraw draw, cudaStream_t stream);

}  // namespace qflow::cuda
