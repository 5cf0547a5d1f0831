// libFuzzer target: PNG bytes -> data::decode_png (what read_png and ImageFolder use), in
// every channel mode. See Note [Fuzzing the readers].
//
// libpng checks every chunk's CRC-32, so almost every mutation would stop at the first
// corrupted chunk. The target therefore rewrites the CRCs of the input's chunks before
// decoding: mutations reach the chunk parsers and the decoder instead of the CRC check.
// (A wrong CRC itself is covered by the unit tests.)
#include <zlib.h>

#include <vector>

#include "fuzz_util.h"
#include "qflow/data/png.h"

using namespace qflow;

namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Walks the chunks after the 8-byte signature, rewriting each complete chunk's CRC.
void fix_crcs(std::vector<uint8_t>& png) {
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint64_t length = be32(&png[at]);
    if (length > png.size() - at - 12) break;
    const uLong crc = crc32(0, &png[at + 4], static_cast<uInt>(4 + length));
    uint8_t* out = &png[at + 8 + length];
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
    at += 12 + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> png(data, data + size);
  fix_crcs(png);
  Tensor native;
  if (!fuzz::accepts([&] { native = data::decode_png(png, "fuzz.png"); })) return 0;
  fuzz::require(native.dim() == 3 && native.sizes()[0] >= 1 && native.sizes()[0] <= 4, "a decoded PNG is (C, H, W), C in 1..4");
  // The conversions: one more mode per input (all three over the corpus), each must agree on
  // the image size with the native decode.
  const data::PngChannels modes[] = {data::PngChannels::Gray, data::PngChannels::RGB, data::PngChannels::RGBA};
  const int64_t want_c[] = {1, 3, 4};
  const size_t m = size % 3;
  Tensor converted;
  fuzz::require(fuzz::accepts([&] { converted = data::decode_png(png, "fuzz.png", modes[m]); }),
                "an image that decodes natively decodes in every channel mode");
  fuzz::require(converted.sizes()[0] == want_c[m] && converted.sizes()[1] == native.sizes()[1] &&
                    converted.sizes()[2] == native.sizes()[2],
                "a converted PNG has the mode's channels and the native size");
  return 0;
}
