// GzipReader: gzip decompression through zlib's inflate, pulled by the consumer.
#include <zlib.h>

#include <algorithm>

#include "qflow/core/error.h"
#include "qflow/data/byte_reader.h"

namespace qflow::data {

struct GzipReader::ZState {
  z_stream stream{};
  bool initialised = false;
};

namespace {
constexpr size_t kInputChunk = size_t{1} << 18;
}  // namespace

GzipReader::GzipReader(std::unique_ptr<ByteReader> source)
    : source_(std::move(source)), z_(std::make_unique<ZState>()), in_(kInputChunk) {
  // 16 + MAX_WBITS: accept the gzip wrapper only (with its CRC-32 and length check).
  const int rc = inflateInit2(&z_->stream, 16 + MAX_WBITS);
  QFLOW_CHECK(rc == Z_OK, "{}: cannot initialise zlib (error {})", source_->name(), rc);
  z_->initialised = true;
}

GzipReader::~GzipReader() {
  if (z_->initialised) inflateEnd(&z_->stream);
}

bool GzipReader::refill() {
  z_stream& z = z_->stream;
  if (z.avail_in > 0) return true;
  const size_t got = source_->read(in_.data(), in_.size());
  z.next_in = in_.data();
  z.avail_in = static_cast<uInt>(got);
  return got > 0;
}

// After the end of one gzip member: either the input ends here, or another member follows
// (`cat a.gz b.gz` is a valid gzip file).
bool GzipReader::start_next_member() {
  z_stream& z = z_->stream;
  if (!refill()) return false;
  const uint64_t offset = source_->position() - z.avail_in;
  QFLOW_CHECK(z.next_in[0] == 0x1f, "{}: corrupt gzip stream: trailing garbage at compressed offset {}", name(), offset);
  QFLOW_CHECK(inflateReset(&z) == Z_OK, "{}: cannot reset zlib at compressed offset {}", name(), offset);
  return true;
}

size_t GzipReader::read(void* dst, size_t n) {
  if (finished_ || n == 0) return 0;
  z_stream& z = z_->stream;
  z.next_out = static_cast<Bytef*>(dst);
  // zlib counts in uInt; larger requests are served in several inflate calls.
  size_t left = n;
  while (left > 0) {
    z.avail_out = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    const uInt asked = z.avail_out;
    const bool have_input = refill();
    const int rc = inflate(&z, Z_NO_FLUSH);
    left -= asked - z.avail_out;
    const uint64_t offset = source_->position() - z.avail_in;
    if (rc == Z_STREAM_END) {
      if (!start_next_member()) {
        finished_ = true;
        break;
      }
      continue;
    }
    // Z_BUF_ERROR = no progress possible: with an empty input that means the compressed data
    // ended before the stream did (inflate first drains whatever output it still holds).
    QFLOW_CHECK(!(rc == Z_BUF_ERROR && !have_input),
                "{}: truncated gzip stream: the compressed data ends at offset {} before the end of the stream",
                name(), offset);
    QFLOW_CHECK(rc == Z_OK, "{}: corrupt gzip stream at compressed offset {}: {}", name(), offset,
                z.msg != nullptr ? z.msg : zError(rc));
  }
  const size_t produced = n - left;
  position_ += produced;
  return produced;
}

}  // namespace qflow::data
