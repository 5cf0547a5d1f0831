#pragma once
// The process's oneDNN engine, this thread's stream and scratchpad, and qflow buffers seen as
// oneDNN memory (internal to core's kernels; oneDNN never appears in a public header).
#include <oneapi/dnnl/dnnl.hpp>

#include "qflow/core/tensor.h"

namespace qflow::kernels::onednn {

/// The CPU engine (one per process; oneDNN threads through the same OpenMP runtime as qflow,
/// so `set_num_threads` governs both).
const dnnl::engine& engine();
/// This thread's in-order stream: primitives run synchronously on the calling thread's team.
dnnl::stream& stream();

/// A qflow tensor large enough for `md` (from the caching allocator), uninitialised.
Tensor buffer_for(const dnnl::memory::desc& md);
/// `data` seen as oneDNN memory of layout `md` (no copy; the caller keeps `data` alive).
dnnl::memory view(const dnnl::memory::desc& md, const void* data);

/// Note [One scratchpad]
/// Primitives are created with a user-managed scratchpad: instead of every cached primitive
/// holding its own temporary buffer (Winograd's transformed tiles are tens of MB at batch
/// 128), one per-thread buffer, grown to the largest request, serves them all.
dnnl::memory scratchpad(const dnnl::memory::desc& md);

/// Attributes every qflow primitive is created with (user scratchpad).
dnnl::primitive_attr default_attr();

/// Plain row-major 4-D f32 layout (NCHW activations, OIHW weights) of `dims`.
dnnl::memory::desc plain_nchw(const dnnl::memory::dims& dims);

}  // namespace qflow::kernels::onednn
