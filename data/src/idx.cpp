// IDX reader (MNIST, Fashion-MNIST, KMNIST, ...).
#include "qflow/data/idx.h"

#include <algorithm>

#include "qflow/core/error.h"
#include "qflow/data/byte_reader.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace {
// Full MNIST is 47 MB and the largest IDX sets are a few hundred MB; 4 GiB is a broken header.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 32;
constexpr int kMaxDims = 8;
constexpr uint64_t kChunk = uint64_t{1} << 22;

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
}  // namespace

Tensor read_idx(const std::string& path, int expected_dims) {
  auto in = open_file(path);
  uint8_t magic[4];
  in->read_exact(magic, 4, "IDX magic");
  const uint32_t word = big_endian32(magic);
  QFLOW_CHECK(magic[0] == 0 && magic[1] == 0, "{}: not an IDX file: magic 0x{:08x} at offset 0", path, word);
  QFLOW_CHECK(magic[2] == 0x08, "{}: IDX element type 0x{:02x} is not supported (only 0x08, unsigned bytes)", path,
              int{magic[2]});
  const int ndim = magic[3];
  QFLOW_CHECK(expected_dims <= 0 || ndim == expected_dims, "{}: IDX magic mismatch: expected 0x{:08x}, found 0x{:08x}",
              path, 0x800u + static_cast<uint32_t>(expected_dims), word);
  QFLOW_CHECK(ndim >= 1 && ndim <= kMaxDims, "{}: IDX header declares {} dims (magic 0x{:08x})", path, ndim, word);

  uint8_t raw_dims[4 * kMaxDims];
  in->read_exact(raw_dims, static_cast<size_t>(4 * ndim), "IDX dims");
  std::vector<int64_t> dims;
  uint64_t total = 1;
  // The product of the non-zero dims bounds the strides: a zero dim makes the tensor empty,
  // but [0, 2^31, 2^31, 2^31] would still overflow its strides.
  uint64_t extent = 1;
  for (int d = 0; d < ndim; ++d) {
    dims.push_back(big_endian32(raw_dims + 4 * d));
    total *= static_cast<uint64_t>(dims.back());  // < 2^32 per factor, checked every step
    extent *= std::max<uint64_t>(static_cast<uint64_t>(dims.back()), 1);
    QFLOW_CHECK(total <= kMaxIdxBytes && extent <= kMaxIdxBytes,
                "{}: absurd IDX dims {}: refusing to allocate more than {} bytes", path, dims, kMaxIdxBytes);
  }
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(ndim);
  if (const auto size = in->size()) {
    QFLOW_CHECK(*size >= header + total, "{}: truncated: {} bytes, but the header's dims {} need {}", path, *size, dims,
                header + total);
    QFLOW_CHECK(*size == header + total, "{}: oversized: {} bytes, but the header's dims {} need {} ({} trailing bytes)",
                path, *size, dims, header + total, *size - header - total);
  }
  // Grow with the data actually read: a gzip stream's header may lie (Note [Streaming readers]).
  detail::ByteBuffer data;
  data.reserve(static_cast<size_t>(std::min(total, in->size() ? total : kChunk)));
  for (uint64_t done = 0; done < total;) {
    const uint64_t count = std::min(kChunk, total - done);
    data.resize(static_cast<size_t>(done + count));
    in->read_exact(data.data() + done, static_cast<size_t>(count), fmt::format("IDX data (dims {})", dims));
    done += count;
  }
  in->expect_end(fmt::format("the {} bytes of IDX data (dims {})", total, dims));
  return detail::wrap_bytes(std::move(data), dims);
}

}  // namespace qflow::data
