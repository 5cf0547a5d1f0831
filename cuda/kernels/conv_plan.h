#pragma once
// The cuDNN side of the GPU convolutions (Note [cuDNN convolutions] in conv_ops.cpp): the
// validated geometry, one Plan per convolution (descriptors and the algorithm of each pass,
// chosen once and cached) and filters in the layout cuDNN is given. Host code only.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::cuda::conv {

/// Sizes and hyper-parameters of one 2-D convolution, validated exactly as the CPU's
/// conv_geometry (core/kernels/conv/im2col.cpp) does, with the same messages.
struct Geometry {
  int64_t n = 1, c = 0, h = 0, w = 0;  // input (n = 1 for an unbatched input)
  int64_t o = 0, kh = 0, kw = 0;       // weight (O, C / groups, kH, kW)
  int64_t groups = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;  // output plane
  bool batched = true;     // input was 4-D

  int64_t cg() const { return c / groups; }
  /// Output sizes, (N, O, Ho, Wo) or (O, Ho, Wo).
  std::vector<int64_t> output_sizes() const;
};

/// Validates input (N, C, H, W) / (C, H, W) against weight (O, C / groups, kH, kW) and the
/// hyper-parameters; errors name `op` and the offending shapes or values.
Geometry geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& weight, const IntList& stride,
                  const IntList& padding, const IntList& dilation, int64_t groups, const char* op);

enum class Pass : int { Forward = 0, BackwardData = 1, BackwardFilter = 2 };

/// One convolution as cuDNN runs it.
struct PlanSpec {
  Device device;
  DType dtype = DType::Float32;
  bool nhwc = true;   // activations and filter channels-last; NCHW otherwise (float64)
  bool tf32 = false;  // float32 may run in TF32 (Note [TF32]); false for float64
  bool deterministic = false;  // only bit-reproducible algorithms (Note [Deterministic algorithms])
  Geometry g;         // g.n: the images of one cuDNN call (see images_per_call in conv_ops.cpp)
};

/// An algorithm of one pass and the workspace it runs with.
struct Algo {
  int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;
};

/// The descriptors of one PlanSpec (one convolution descriptor per pass: each carries the math
/// type of its pass's algorithm) and the algorithm of each pass, chosen at its first use.
class Plan {
 public:
  explicit Plan(const PlanSpec& spec);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  cudnnTensorDescriptor_t x_desc() const { return x_; }
  cudnnTensorDescriptor_t y_desc() const { return y_; }
  cudnnFilterDescriptor_t w_desc() const { return w_; }
  cudnnConvolutionDescriptor_t conv_desc(Pass pass) const { return conv_[static_cast<int>(pass)]; }

  /// The pass's algorithm. The first call times cuDNN's candidates on these buffers
  /// (cudnnFind*AlgorithmEx, which writes y / dx / dw: the caller computes them right after)
  /// and keeps the fastest one that the math mode allows; later calls return it.
  Algo forward(cudnnHandle_t handle, const void* x, const void* w, void* y, const char* op);
  Algo backward_data(cudnnHandle_t handle, const void* w, const void* dy, void* dx, const char* op);
  Algo backward_filter(cudnnHandle_t handle, const void* x, const void* dy, void* dw, const char* op);

  /// Whether cuDNN offers any algorithm for the pass in this plan's layout and math mode, by
  /// its heuristic (no benchmark, no buffers); cached. conv_ops.cpp falls back to NCHW for a
  /// float32 convolution whose channels-last form has none.
  bool supports(cudnnHandle_t handle, Pass pass);

 private:
  void release();  // destroys the descriptors

  PlanSpec spec_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_[3] = {nullptr, nullptr, nullptr};
  std::mutex mutex_;  // guards chosen_ / algo_ (the first call of a pass benchmarks under it)
  bool chosen_[3] = {false, false, false};
  Algo algo_[3];
  int supported_[3] = {-1, -1, -1};  // -1: not asked yet
};

/// The cached plan of `spec` (created on first use; plans live for the process).
Plan& plan_for(const PlanSpec& spec);

/// `weight` (O, C / groups, kH, kW) as cuDNN reads it: channels-last (OHWI memory) when `nhwc`,
/// contiguous OIHW otherwise; 16-byte aligned. A weight already in that layout is returned as
/// it is (a 1x1 or depthwise OIHW weight is also OHWI); a contiguous OIHW weight is transposed
/// once per version of its storage (Note [Version counter]) and the copy kept, so the forward
/// and backward-data passes of a step and every inference call share one copy.
Tensor filter_in_layout(const Tensor& weight, bool nhwc, cudaStream_t stream);

/// Counters of the caches, for tests and benchmarks.
struct CacheStats {
  int64_t plans = 0;          // cached plans
  int64_t algo_searches = 0;  // passes whose algorithm was chosen (benchmarked) so far
  int64_t weight_copies = 0;  // filters transposed into channels-last
  int64_t weight_reuses = 0;  // ... served from the cache (same storage, offset and version)
};
CacheStats cache_stats();
/// Drops every plan and cached filter.
void clear_cache();

}  // namespace qflow::cuda::conv
