#pragma once
// IDX files (the MNIST family's format, http://yann.lecun.com/exdb/mnist/): a 4-byte magic
// 0x0000TTNN (TT = element type, NN = number of dims), NN big-endian uint32 dims, then the
// elements in row-major order.
#include <string>

#include "qflow/core/tensor.h"

namespace qflow::data {

/// Reads an IDX file of unsigned bytes (type 0x08), plain or gzip-compressed, as a uint8
/// tensor shaped like the file's dims. `expected_dims` > 0 requires that many dims (MNIST
/// images: 3, i.e. magic 0x00000803; labels: 1, magic 0x00000801). The header is validated
/// against the data (truncated or trailing bytes) and absurd dims are refused before
/// anything is allocated.
Tensor read_idx(const std::string& path, int expected_dims = 0);

}  // namespace qflow::data
