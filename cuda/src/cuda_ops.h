#pragma once
// Helpers for the CUDA kernels' registrations (cuda/kernels/*_ops.cpp): host code that reads an
// op's arguments, allocates its outputs on the device and calls a launcher from a .cu file.
// Note [CUDA kernel files]: device code lives in .cu files that include only plain headers
// (<cstdint>, <cuda_runtime_api.h>, cuda/kernels/*.cuh) and export launchers taking pointers,
// sizes and a cudaStream_t; the .cpp beside them holds the kernels that read an op's arguments
// and ends with the registrations gen-ops writes from the ops' `cuda = "kernel"` (Note [One
// declaration per op]). nvcc then never parses qflow's C++20 headers, and a launcher is
// testable from any host code.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "context.h"
#include "cuda_check.h"
#include "qflow/core/factory.h"
#include "qflow/core/op_registry.h"
#include "qflow/core/tensor.h"

namespace qflow::cuda {

/// Note [Channels-last on the GPU]
/// cuDNN's fast float32 (TF32) and bf16 convolutions run on NHWC activations: measured on an
/// H100 for ResNet18's 20 convolutions, TF32 NHWC 4.4 ms against NCHW 5.8 ms at batch 128 (issue
/// 33). Strides describe NHWC exactly, so unlike oneDNN's blocked layouts (Note [Opaque
/// layouts]) no special tensor kind is needed: a convolution returns a tensor of logical sizes
/// (N, C, H, W) with strides (HWC, 1, WC, C), and every op after it keeps that order —
/// element-wise ops allocate their outputs with empty_like_layout and walk dense operands of one
/// order as flat arrays; batch norm and pooling read channels innermost. Views, printing,
/// state_dict and .cpu() see an ordinary strided tensor; .contiguous() makes it row-major.
/// Parameters keep the layout they were created with (row-major, as the CPU and files expect).

/// True when t's elements fill [data, data + numel) exactly once, in any dimension order
/// (row-major, channels-last, or any permutation): such tensors are walked as flat arrays.
bool is_dense(const Tensor& t);
/// A new tensor on t's device of t's sizes, in t's memory order when t is dense (a
/// channels-last activation stays channels-last, Note [Channels-last on the GPU]), row-major
/// otherwise.
Tensor empty_like_layout(const Tensor& t, DType dtype);
inline Tensor empty_like_layout(const Tensor& t) { return empty_like_layout(t, t.dtype()); }
/// A new row-major tensor on `device`.
inline Tensor empty_on(const std::vector<int64_t>& sizes, DType dtype, Device device) {
  return empty(sizes, dtype, device);
}
/// Strides of a channels-last (NHWC) tensor of sizes (N, C, H, W).
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);
/// A new 4-D tensor on `device` in channels-last order (logical sizes N, C, H, W).
Tensor empty_channels_last(const std::vector<int64_t>& sizes, DType dtype, Device device);
bool is_channels_last(const Tensor& t);

/// The device stream to launch on for a kernel of `t`'s device, with that device current.
struct Launch {
  explicit Launch(const Tensor& t) : guard(t.device()), stream(cuda::stream(t.device())) {}
  DeviceGuard guard;
  cudaStream_t stream;
};

}  // namespace qflow::cuda
