// TarReader: ustar/GNU/pax headers, validated, over any ByteReader.
#include "qflow/data/tar_reader.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "qflow/core/error.h"

namespace qflow::data {

namespace detail {

std::optional<uint64_t> parse_tar_number(const uint8_t* field, size_t width) {
  if (width == 0) return std::nullopt;
  if (field[0] & 0x80) {
    // GNU base-256 (big-endian, used for sizes >= 8 GiB); bit 6 set means negative.
    if (field[0] & 0x40) return std::nullopt;
    uint64_t v = field[0] & 0x3f;
    for (size_t i = 1; i < width; ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | field[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  uint64_t v = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  // Writers end the digits with NUL or space; anything else means a damaged field.
  for (; i < width; ++i)
    if (field[i] != ' ' && field[i] != '\0') return std::nullopt;
  return v;
}

}  // namespace detail

namespace {

constexpr size_t kBlock = 512;
// GNU long names and pax headers are read into memory; real ones are a few hundred bytes.
constexpr uint64_t kMaxMetaSize = uint64_t{1} << 20;

std::string field_string(const uint8_t* p, size_t width) {
  const auto* end = static_cast<const uint8_t*>(std::memchr(p, 0, width));
  return std::string(reinterpret_cast<const char*>(p), end ? static_cast<size_t>(end - p) : width);
}

bool all_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

uint64_t padding_of(uint64_t size) { return (kBlock - size % kBlock) % kBlock; }

// The checksum is the sum of the header bytes with the checksum field read as spaces; old
// writers summed signed chars, so both sums are accepted (as GNU tar does).
void check_checksum(const uint8_t* b, const std::string& archive, uint64_t offset) {
  const auto stored = detail::parse_tar_number(b + 148, 8);
  QFLOW_CHECK(stored.has_value(), "{}: bad tar header at offset {}: malformed checksum field (corrupt archive or not a tar file)",
              archive, offset);
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    unsigned_sum += in_field ? ' ' : b[i];
    signed_sum += in_field ? ' ' : static_cast<int8_t>(b[i]);
  }
  QFLOW_CHECK(*stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum,
              "{}: bad tar header at offset {}: checksum {} does not match the computed {} (corrupt archive or not "
              "a tar file)",
              archive, offset, *stored, unsigned_sum);
}

uint64_t number_field(const uint8_t* b, size_t at, size_t width, const char* what, const std::string& archive,
                      uint64_t offset) {
  const auto v = detail::parse_tar_number(b + at, width);
  QFLOW_CHECK(v.has_value(), "{}: bad tar header at offset {}: malformed {} field '{}'", archive, offset, what,
              field_string(b + at, width));
  return *v;
}

// pax records are "<length> <key>=<value>\n", the length counting the whole record.
void parse_pax(std::string_view data, std::string& path, std::optional<uint64_t>& size, const std::string& archive,
               uint64_t offset) {
  while (!data.empty()) {
    const size_t space = data.find(' ');
    QFLOW_CHECK(space != std::string_view::npos && space > 0 && space <= 20,
                "{}: bad pax header at offset {}: malformed record length", archive, offset);
    uint64_t len = 0;
    for (char c : data.substr(0, space)) {
      QFLOW_CHECK(c >= '0' && c <= '9', "{}: bad pax header at offset {}: malformed record length", archive, offset);
      len = len * 10 + static_cast<uint64_t>(c - '0');
    }
    QFLOW_CHECK(len > space + 1 && len <= data.size() && data[len - 1] == '\n',
                "{}: bad pax header at offset {}: record length {} does not fit the header", archive, offset, len);
    const std::string_view record = data.substr(space + 1, len - space - 2);
    const size_t eq = record.find('=');
    QFLOW_CHECK(eq != std::string_view::npos, "{}: bad pax header at offset {}: record without '='", archive, offset);
    const std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") path = std::string(value);
    if (key == "size") {
      uint64_t v = 0;
      QFLOW_CHECK(!value.empty() && value.size() <= 19, "{}: bad pax header at offset {}: malformed size", archive, offset);
      for (char c : value) {
        QFLOW_CHECK(c >= '0' && c <= '9', "{}: bad pax header at offset {}: malformed size", archive, offset);
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      size = v;
    }
    data.remove_prefix(len);
  }
}

}  // namespace

// ---- MemberReader -------------------------------------------------------------------------------
void TarReader::MemberReader::reset(std::string name, uint64_t size) {
  name_ = std::move(name);
  size_ = size;
  position_ = 0;
}

size_t TarReader::MemberReader::read(void* dst, size_t n) {
  const size_t want = static_cast<size_t>(std::min<uint64_t>(n, remaining()));
  const size_t got = want == 0 ? 0 : archive_.read(dst, want);
  QFLOW_CHECK(got == want, "{}: truncated archive: the member ends at archive offset {} after {} of its {} bytes", name_,
              archive_.position(), position_ + got, size_);
  position_ += got;
  return got;
}

// ---- TarReader ----------------------------------------------------------------------------------
TarReader::TarReader(ByteReader& archive) : archive_(archive), member_(archive) {}

ByteReader& TarReader::member() { return member_; }

void TarReader::finish_member() {
  if (!in_member_) return;
  in_member_ = false;
  archive_.skip(member_.remaining() + padding_of(*member_.size()), "tar member data");
}

bool TarReader::read_header(uint8_t (&block)[512], uint64_t& offset) {
  offset = archive_.position();
  const size_t got = archive_.read(block, kBlock);
  // A stream that stops exactly between members is accepted as the end (some writers omit
  // the two zero blocks); a partial header is not.
  if (got == 0) return false;
  QFLOW_CHECK(got == kBlock, "{}: truncated tar header at offset {} ({} of 512 bytes)", archive_.name(), offset, got);
  // The end-of-archive marker: a zero block (normally two).
  return !all_zero(block, kBlock);
}

std::string TarReader::read_meta_data(uint64_t size, uint64_t header_offset, const char* what) {
  QFLOW_CHECK(size <= kMaxMetaSize, "{}: bad tar header at offset {}: {} of {} bytes is implausibly large",
              archive_.name(), header_offset, what, size);
  std::string data(static_cast<size_t>(size), '\0');
  archive_.read_exact(data.data(), data.size(), what);
  archive_.skip(padding_of(size), what);
  return data;
}

std::optional<TarEntry> TarReader::next() {
  if (ended_) return std::nullopt;
  finish_member();
  std::string long_name;
  std::optional<uint64_t> pax_size;
  for (;;) {
    uint8_t b[kBlock];
    uint64_t offset = 0;
    if (!read_header(b, offset)) {
      ended_ = true;
      return std::nullopt;
    }
    const std::string& archive = archive_.name();
    check_checksum(b, archive, offset);
    const bool posix = std::memcmp(b + 257, "ustar\0", 6) == 0;
    const bool gnu = std::memcmp(b + 257, "ustar ", 6) == 0;
    QFLOW_CHECK(posix || gnu || all_zero(b + 257, 8), "{}: bad tar header at offset {}: unknown magic '{}'", archive,
                offset, field_string(b + 257, 6));
    number_field(b, 100, 8, "mode", archive, offset);
    number_field(b, 136, 12, "mtime", archive, offset);
    uint64_t size = number_field(b, 124, 12, "size", archive, offset);
    const char type = static_cast<char>(b[156]);

    if (type == 'L') {  // GNU: the next member's name is this member's data
      const std::string data = read_meta_data(size, offset, "GNU long name");
      long_name = data.substr(0, data.find('\0'));
      continue;
    }
    if (type == 'x') {  // pax: key=value records for the next member
      parse_pax(read_meta_data(size, offset, "pax header"), long_name, pax_size, archive, offset);
      continue;
    }
    if (type == 'K' || type == 'g') {  // long link name, pax global header: not needed
      read_meta_data(size, offset, "tar metadata");
      continue;
    }

    TarEntry entry;
    entry.type = type;
    entry.header_offset = offset;
    entry.size = pax_size.value_or(size);
    if (!long_name.empty()) {
      entry.path = long_name;
    } else {
      const std::string prefix = posix ? field_string(b + 345, 155) : std::string();
      entry.path = prefix.empty() ? field_string(b, 100) : prefix + "/" + field_string(b, 100);
    }
    // Links, devices, directories and fifos carry no data whatever their size field says
    // (as Python's tarfile reads them); regular and unknown types do.
    if (type >= '1' && type <= '6') entry.size = 0;
    member_.reset(archive + ":" + entry.path, entry.size);
    in_member_ = true;
    return entry;
  }
}

}  // namespace qflow::data
