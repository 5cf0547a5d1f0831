#pragma once
// Launchers of the copy kernels (copy.cu), registered by copy_ops.cpp: strided, broadcasting,
// dtype-converting copies and fills. Operands are described by a StridedGeometry (strided.cuh;
// operand 0 is the destination).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/strided.cuh"

namespace qflow::cuda {

/// out = static_cast<to>(in) element by element (operands: out, in), any pair of dtypes.
void launch_cast(ScalarType to, ScalarType from, const StridedGeometry& g, void* out, const void* in,
                 cudaStream_t stream);
/// out = value (operands: out), write-only: out may be fresh memory.
void launch_fill(ScalarType dtype, const StridedGeometry& g, void* out, ScalarArg value, cudaStream_t stream);

}  // namespace qflow::cuda
