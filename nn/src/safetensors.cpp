// The safetensors format: encoding, validation and decoding. See Note [Checkpoint files].
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "file_io.h"
#include "qflow/core/factory.h"
#include "qflow/nn/serialize.h"

namespace qflow::nn {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian data");

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the Python library's limit
constexpr int kMaxJsonDepth = 16;                   // a valid header nests 3 deep

struct DTypeCode {
  DType dtype;
  const char* name;
  int order;  // position in safetensors' Dtype enum, which orders the layout
};
constexpr DTypeCode kCodes[] = {{DType::Bool, "BOOL", 0},     {DType::UInt8, "U8", 1},     {DType::Int8, "I8", 2},
                                {DType::Int32, "I32", 9},     {DType::Float32, "F32", 11}, {DType::Float64, "F64", 12},
                                {DType::Int64, "I64", 13}};

const DTypeCode& code_of(DType t) {
  for (const auto& c : kCodes) {
    if (c.dtype == t) return c;
  }
  QFLOW_FAIL("save: dtype {} has no safetensors code", t);
}

const DTypeCode* code_named(const std::string& name) {
  for (const auto& c : kCodes) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

// ---- writing -----------------------------------------------------------------------------

struct Prepared {
  std::string prefix;  // 8-byte length + padded JSON header
  std::vector<Tensor> tensors;  // contiguous, in layout order
};

Prepared prepare(const StateDict& dict, const CheckpointMetadata& metadata) {
  struct Item {
    const std::string* name;
    Tensor tensor;
    int order;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : dict) {
    QFLOW_CHECK(name != "__metadata__", "save: '__metadata__' is reserved and cannot name a tensor");
    QFLOW_CHECK(t.defined(), "save: tensor '{}' is undefined", name);
    // Files hold host bytes whatever the device (a GPU run resumes on the CPU and back).
    items.push_back({&name, t.detach().to(Device::cpu()).contiguous(), code_of(t.dtype()).order});
  }
  // The Python library's order: descending dtype, then name (byte-wise).
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.order != b.order ? a.order > b.order : *a.name < *b.name;
  });
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  Prepared out;
  uint64_t offset = 0;
  for (Item& item : items) {
    OrderedJson info = OrderedJson::object();
    info["dtype"] = code_of(item.tensor.dtype()).name;
    info["shape"] = item.tensor.sizes();
    info["data_offsets"] = OrderedJson::array({offset, offset + item.tensor.nbytes()});
    offset += item.tensor.nbytes();
    header[*item.name] = std::move(info);
    out.tensors.push_back(std::move(item.tensor));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    QFLOW_FAIL("save: a tensor name or metadata string is not valid UTF-8 ({})", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // aligns the data buffer to 8 bytes
  out.prefix.resize(8);
  const uint64_t n = text.size();
  std::memcpy(out.prefix.data(), &n, 8);
  out.prefix += text;
  return out;
}

std::span<const uint8_t> bytes_of(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }
std::span<const uint8_t> bytes_of(const Tensor& t) {
  return {static_cast<const uint8_t*>(t.raw_data()), t.nbytes()};
}

// ---- reading -----------------------------------------------------------------------------

struct TensorEntry {
  std::string name;
  const DTypeCode* code;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

struct TooDeep {};

// Parses the header, rejecting duplicate keys (which JSON libraries silently merge) and
// absurd nesting.
Json parse_header(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Json::parse_event_t::key && !open_objects.empty()) {
      if (!open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), callback);
  } catch (const TooDeep&) {
    QFLOW_FAIL("load: '{}': the JSON header nests deeper than {} levels", source, kMaxJsonDepth);
  } catch (const Json::exception& e) {
    QFLOW_FAIL("load: '{}': the header is not valid JSON: {}", source, e.what());
  }
  QFLOW_CHECK(duplicate.empty(), "load: '{}': the header repeats the key '{}'", source, duplicate);
  QFLOW_CHECK(root.is_object(), "load: '{}': the header is not a JSON object", source);
  return root;
}

CheckpointMetadata parse_metadata(const Json& j, const std::string& source) {
  QFLOW_CHECK(j.is_object(), "load: '{}': __metadata__ is not an object", source);
  CheckpointMetadata out;
  for (const auto& [k, v] : j.items()) {
    QFLOW_CHECK(v.is_string(), "load: '{}': __metadata__ value of '{}' is not a string", source, k);
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

TensorEntry parse_entry(const std::string& name, const Json& j, uint64_t data_size, const std::string& source) {
  auto check = [&](bool ok, std::string_view what) {
    QFLOW_CHECK(ok, "load: '{}': tensor '{}': {}", source, name, what);
  };
  check(j.is_object(), "its entry is not a JSON object");
  check(j.contains("dtype") && j["dtype"].is_string(), "missing or non-string \"dtype\"");
  const std::string dtype = j["dtype"].get<std::string>();
  const DTypeCode* code = code_named(dtype);
  QFLOW_CHECK(code != nullptr, "load: '{}': tensor '{}': unknown dtype '{}' (qflow reads BOOL, U8, I8, I32, I64, F32, F64)",
              source, name, dtype);
  check(j.contains("shape") && j["shape"].is_array(), "missing or non-array \"shape\"");
  TensorEntry e{name, code, {}, 0, 0};
  uint64_t numel = 1;
  // The product of the non-zero dims (the contiguous strides) must fit int64 too: a zero dim
  // makes [0, 2^40, 2^40] empty, but its strides would overflow.
  uint64_t extent = 1;
  bool overflow = false;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (const Json& d : j["shape"]) {
    check(d.is_number_unsigned(), "shape entries must be non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    check(v <= kMax, "a shape entry is too large");
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
    numel *= v;
    if (v != 0 && extent > kMax / v) overflow = true;
    extent *= std::max<uint64_t>(v, 1);
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const uint64_t item = element_size(code->dtype);
  check(!overflow && numel <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / item,
        "the shape's byte size overflows");
  check(j.contains("data_offsets") && j["data_offsets"].is_array() && j["data_offsets"].size() == 2 &&
            j["data_offsets"][0].is_number_unsigned() && j["data_offsets"][1].is_number_unsigned(),
        "\"data_offsets\" must be two non-negative integers");
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  QFLOW_CHECK(e.begin <= e.end, "load: '{}': tensor '{}': data_offsets [{}, {}] end before they begin", source, name,
              e.begin, e.end);
  QFLOW_CHECK(e.end <= data_size,
              "load: '{}': tensor '{}': data_offsets [{}, {}] run past the end of the data buffer ({} bytes)", source,
              name, e.begin, e.end, data_size);
  QFLOW_CHECK(e.end - e.begin == numel * item,
              "load: '{}': tensor '{}': shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}", source, name,
              e.shape, dtype, numel * item, e.begin, e.end, e.end - e.begin);
  return e;
}

// The ranges must tile [0, data_size) exactly, as the Python library requires.
void check_tiling(std::vector<const TensorEntry*> entries, uint64_t data_size, const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry* e : entries) {
    QFLOW_CHECK(e->begin >= covered, "load: '{}': tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", source,
                previous ? previous->name : "", previous ? previous->begin : 0, covered, e->name, e->begin, e->end);
    QFLOW_CHECK(e->begin == covered, "load: '{}': bytes [{}, {}) of the data buffer belong to no tensor", source,
                covered, e->begin);
    covered = e->end;
    previous = e;
  }
  QFLOW_CHECK(covered == data_size, "load: '{}': {} bytes of trailing garbage after the last tensor", source,
              data_size - covered);
}

Tensor make_tensor(const TensorEntry& e, const uint8_t* data) {
  Tensor t = empty(e.shape, e.code->dtype);
  const size_t n = e.end - e.begin;
  if (n == 0) return t;
  auto* dst = static_cast<uint8_t*>(t.raw_data());
  if (e.code->dtype == DType::Bool) {
    // Any byte other than 0/1 would be an invalid C++ bool; normalise like a cast would.
    for (size_t i = 0; i < n; ++i) dst[i] = data[e.begin + i] != 0 ? 1 : 0;
  } else {
    std::memcpy(dst, data + e.begin, n);
  }
  return t;
}

}  // namespace

std::vector<uint8_t> to_safetensors_bytes(const StateDict& tensors, const CheckpointMetadata& metadata) {
  const Prepared p = prepare(tensors, metadata);
  std::vector<uint8_t> out(p.prefix.begin(), p.prefix.end());
  for (const Tensor& t : p.tensors) {
    const auto b = bytes_of(t);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

void save(const StateDict& tensors, const std::string& path, const CheckpointMetadata& metadata) {
  const Prepared p = prepare(tensors, metadata);
  std::vector<std::span<const uint8_t>> chunks{bytes_of(p.prefix)};
  for (const Tensor& t : p.tensors) chunks.push_back(bytes_of(t));
  detail::write_file_atomically(path, chunks, "save");
}

StateDict from_safetensors_bytes(std::span<const uint8_t> bytes, const std::string& source,
                                 CheckpointMetadata* metadata) {
  const uint64_t size = bytes.size();
  QFLOW_CHECK(size >= 8, "load: '{}': {} bytes is too short for a safetensors file (the header length alone is 8)",
              source, size);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  QFLOW_CHECK(n <= kMaxHeaderBytes, "load: '{}': header length {} exceeds the limit of {} bytes", source, n,
              kMaxHeaderBytes);
  QFLOW_CHECK(n <= size - 8, "load: '{}': header length {} runs past the end of the file ({} bytes)", source, n, size);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  QFLOW_CHECK(!text.empty() && text.front() == '{', "load: '{}': the header does not start with '{{'", source);
  const Json root = parse_header(text, source);

  const uint64_t data_size = size - 8 - n;
  std::vector<TensorEntry> entries;
  CheckpointMetadata meta;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_null()) meta = parse_metadata(value, source);  // null is "no metadata" in Python too
    } else {
      entries.push_back(parse_entry(key, value, data_size, source));
    }
  }
  std::vector<const TensorEntry*> order;
  for (const auto& e : entries) order.push_back(&e);
  check_tiling(order, data_size, source);

  // Everything is validated; only now are the bytes read. `root` iterates keys sorted.
  const uint8_t* data = bytes.data() + 8 + n;
  StateDict out;
  for (const auto& e : entries) out.insert(e.name, make_tensor(e, data));
  if (metadata) *metadata = std::move(meta);
  return out;
}

StateDict load(const std::string& path, CheckpointMetadata* metadata) {
  const std::vector<uint8_t> bytes = detail::read_whole_file(path, "load");
  return from_safetensors_bytes(bytes, path, metadata);
}

}  // namespace qflow::nn
