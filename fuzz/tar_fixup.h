#pragma once
// Tar header checksums for the archive fuzz targets: like the PNG target's CRCs (see
// fuzz_png.cpp), a checksum stops nearly every mutation of a header at the first check, so
// the targets rewrite the checksum of each header of a plain tar before reading it. The
// headers are found the way TarReader walks them (header, data rounded up to 512 bytes).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "qflow/data/tar_reader.h"

namespace qflow::fuzz {

inline void fix_tar_checksums(std::vector<uint8_t>& tar) {
  size_t at = 0;
  while (at + 512 <= tar.size()) {
    uint8_t* h = &tar[at];
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; ++i) zero = h[i] == 0;
    if (zero) break;  // end-of-archive marker
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    char field[8];
    std::snprintf(field, sizeof(field), "%06o", sum & 0777777);
    std::memcpy(h + 148, field, 6);
    h[154] = 0;
    h[155] = ' ';
    const auto size = data::detail::parse_tar_number(h + 124, 12);
    if (!size || *size > tar.size()) break;
    const uint64_t data_bytes = (h[156] >= '1' && h[156] <= '6') ? 0 : *size;
    at += 512 + static_cast<size_t>((data_bytes + 511) / 512 * 512);
  }
}

/// True when `bytes` start with the gzip magic (the archive is compressed: nothing to fix).
inline bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

}  // namespace qflow::fuzz
