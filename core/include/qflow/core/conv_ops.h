#pragma once
// Convolution and pooling: the functional API of core/kernels/conv/conv.cpp and pool.cpp.
// Each function is a thin typed call into the op registry (see Note [Op registration]).
//
// Pair arguments (`stride`, `padding`, ...) take one value for both spatial dims or two
// values (height, width), like PyTorch's `int[2]`. Inputs are (N, C, H, W) or unbatched
// (C, H, W), contiguous NCHW (other layouts are copied first); float32 and float64.
//
// Padding "same"/"valid" is resolved by the nn layer (nn::Conv2d / F::conv2d), which turns it
// into explicit (and, for "same" with an even dilated kernel, asymmetric: pad the input first)
// padding; the core op only knows explicit symmetric padding, so a traced graph always
// records the numbers that were used.
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "qflow/core/tensor.h"
#include "qflow/core/ops/pool.h"

namespace qflow {

// ---- convolution -------------------------------------------------------------------------------

/// 2-D cross-correlation. input: (N, C, H, W), weight: (O, C / groups, kH, kW), bias: (O,).
/// Output (N, O, Ho, Wo) with Ho = (H + 2 pH - dH (kH - 1) - 1) / sH + 1 (same for W).
/// An undefined or absent bias means no bias.
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
              int64_t groups = 1);
/// What quantized_conv2d writes: float32 values, or integers on a grid — the next layer's
/// quantized input, q = clamp(round_half_even(y) + zero_point, min, max) (uint8 or int8).
struct QuantizedOutput {
  DType dtype = DType::Float32;
  int64_t zero_point = 0;
  int64_t min = 0, max = 0;
};

/// The integer convolution of a deployed int8 model (Note [Integer convolution]):
///   y = output_scale[o] * sum((input - input_zero_point) * weight) + bias[o] (+ add)   (float32,
/// then ReLU when `relu`), written as float32 or, for an integer `output`, requantized (the caller
/// folds the next scale into output_scale and bias). input: (N, C, H, W) uint8 or int8 (plain or
/// as the previous integer layer wrote it); weight: (O, C / groups, kH, kW) int8; output_scale:
/// float32, 1 or O values (s_x * s_w); bias: float32 (O,) or undefined; add: undefined or float32
/// of the output's shape (float32 outputs only). oneDNN's u8/s8 kernels (VNNI) run it where they
/// can, writing their nhwc layout; exact float64 sums elsewhere.
Tensor quantized_conv2d(const Tensor& input, const Tensor& weight, const Tensor& output_scale,
                        const Tensor& bias = Tensor(), int64_t input_zero_point = 0, const IntList& stride = {1},
                        const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1,
                        bool relu = false, const Tensor& add = Tensor(), const QuantizedOutput& output = {});
/// self = relu(self + quantized_conv2d(input, ..., float32 output)) in place: a residual
/// connection whose float32 stream is not needed afterwards (quant::fuse_integer_layers decides
/// that from the graph). On oneDNN, with self in the kernel's nhwc layout (what a float32
/// quantized_conv2d returns), the kernel accumulates into self's bytes (Note [Integer
/// convolution]); otherwise the result is computed apart and copied into self. Returns self.
Tensor& quantized_conv2d_add_(Tensor& self, const Tensor& input, const Tensor& weight, const Tensor& output_scale,
                              const Tensor& bias = Tensor(), int64_t input_zero_point = 0,
                              const IntList& stride = {1}, const IntList& padding = {0},
                              const IntList& dilation = {1}, int64_t groups = 1, bool relu = false);
/// relu(conv2d(...)) in one op: on oneDNN the ReLU is a post-op applied before the output is
/// stored (an inference fusion, fx::fuse_activations); differentiable like the pair.
Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                   const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
                   int64_t groups = 1);

/// Gradients of conv2d w.r.t. (input, weight, bias) for `grad_output` (N, O, Ho, Wo).
/// Only the requested ones are computed; the others come back undefined.
std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                                   const IntList& stride, const IntList& padding,
                                                   const IntList& dilation, int64_t groups, bool input_grad = true,
                                                   bool weight_grad = true, bool bias_grad = true);

// ---- convolution engine ------------------------------------------------------------------------

/// Which code computes float32 convolutions (float64 always takes im2col + OpenBLAS, the
/// reference). Default OneDNN; the environment variable QFLOW_CONV_ENGINE=im2col|onednn sets
/// the start-up value. Grouped convolutions run on im2col/depthwise kernels either way.
enum class ConvEngine { OneDNN, Im2col };
void set_conv_engine(ConvEngine engine);
ConvEngine conv_engine();

/// oneDNN's algorithm for 3x3 stride-1 layers: Auto takes Winograd where it measured faster
/// (see Note [oneDNN convolution]), Direct never does (for comparisons with PyTorch at tight
/// tolerances), Winograd wherever oneDNN implements it. QFLOW_CONV_ALGO=auto|direct|winograd
/// sets the start-up value.
enum class ConvAlgorithm { Auto, Direct, Winograd };
void set_conv_algorithm(ConvAlgorithm algorithm);
ConvAlgorithm conv_algorithm();
/// Whether oneDNN convolutions hand their outputs (and input gradients) on in the blocked
/// layout their primitives chose, so the next layer need not convert (default true;
/// QFLOW_BLOCKED_LAYOUT=0 sets false at start-up). See Note [Opaque layouts].
void set_conv_keeps_blocked_layout(bool keep);
bool conv_keeps_blocked_layout();

/// How many times, in this process, conv_engine() or conv_algorithm() was read: a computation
/// that never reads them gives the same results under every engine setting. The tests register
/// their engine variants only for suites that read them, and fail a test that reads them
/// outside those suites (tests/engine_variants.cpp, Note [Engine variants of the tests]).
uint64_t conv_settings_reads();

/// "auto", "direct", "winograd" / "onednn", "im2col"; parse_* throw qflow::Error naming the
/// accepted values.
const char* to_string(ConvAlgorithm algorithm);
const char* to_string(ConvEngine engine);
ConvAlgorithm parse_conv_algorithm(std::string_view name);
ConvEngine parse_conv_engine(std::string_view name);

/// The kernel conv2d runs for these arguments under the current settings: "onednn-winograd",
/// "onednn-direct", "depthwise" or "im2col" (creating and caching oneDNN's primitive).
std::string conv2d_kernel_name(const std::vector<int64_t>& input_sizes, const std::vector<int64_t>& weight_sizes,
                               DType dtype, const IntList& stride = {1}, const IntList& padding = {0},
                               const IntList& dilation = {1}, int64_t groups = 1);

/// oneDNN's convolution caches (see Note [oneDNN convolution]), for tests and benchmarks.
struct ConvCacheStats {
  int64_t primitives = 0;        // cached (geometry, pass, algorithm) plans
  int64_t primitive_misses = 0;  // plans created since start-up
  int64_t weight_reorders = 0;   // weights reordered into a primitive's layout
  int64_t weight_reuses = 0;     // ... served from the cache (same storage, same version)
};
ConvCacheStats conv_cache_stats();
/// Drops every cached primitive and reordered weight buffer.
void clear_conv_cache();

/// Sets the convolution engine and algorithm for its lifetime, restoring the previous ones.
class ConvSettingsGuard {
 public:
  ConvSettingsGuard(ConvEngine engine, ConvAlgorithm algorithm);
  ~ConvSettingsGuard();
  ConvSettingsGuard(const ConvSettingsGuard&) = delete;
  ConvSettingsGuard& operator=(const ConvSettingsGuard&) = delete;

 private:
  ConvEngine engine_;
  ConvAlgorithm algorithm_;
};

// ---- pooling -----------------------------------------------------------------------------------
// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops: declared in
// core/ops/pool.toml, their typed functions generated (Note [One declaration per op]).

}  // namespace qflow
