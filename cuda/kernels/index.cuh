#pragma once
// Launchers of the gather/scatter kernels of index.cpp's ops (index.cu), registered by
// index_ops.cpp. Tensors are seen as (outer, n, inner) around the indexed dim, contiguous.
// An index outside its dim stops the kernel with a device-side trap: checking on the host
// would copy the indices back and synchronise (the error surfaces at the next synchronisation).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/strided.cuh"

namespace qflow::cuda {

/// out (outer, n, inner) [o, j, i] = in (outer, size, inner) [o, index[j], i].
void launch_index_select(ScalarType dtype, void* out, const void* in, const int64_t* index, int64_t outer, int64_t size,
                         int64_t n, int64_t inner, cudaStream_t stream);
/// out (outer, size, inner) [o, index[j], i] += alpha * source (outer, n, inner) [o, j, i] for
/// every j in order (repeated indices accumulate; each thread owns one (o, i) column, so the
/// result is deterministic without atomics). bool: out = out || (alpha && source).
void launch_index_add(ScalarType dtype, void* out, const void* source, const int64_t* index, int64_t outer,
                      int64_t size, int64_t n, int64_t inner, ScalarArg alpha, cudaStream_t stream);

}  // namespace qflow::cuda
