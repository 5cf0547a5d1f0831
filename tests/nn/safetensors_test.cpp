// Checkpoints: the safetensors encoding, byte compatibility with the Python library, atomic
// writes and validation of malformed files.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_modules.h"

using namespace qflow;
using namespace qflow::nn;
using namespace qflow::nn::testing;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("qflow_safetensors_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->random_seed() +
                                                                    counter_++);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  static inline int counter_ = 0;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> le64(uint64_t n) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  return out;
}

// 8-byte length + header (unpadded unless the caller pads) + data.
std::vector<uint8_t> file_with(const std::string& header, const std::vector<uint8_t>& data = {}) {
  // Preallocated and filled with std::copy: GCC 12 warns spuriously about vector::insert here.
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const auto length = le64(header.size());
  auto it = std::copy(length.begin(), length.end(), out.begin());
  it = std::copy(header.begin(), header.end(), it);
  std::copy(data.begin(), data.end(), it);
  return out;
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// The tensors both sides of the Python round trip build (see kPythonScript's reference()).
StateDict reference_tensors() {
  std::vector<float> f;
  for (int i = 0; i < 6; ++i) f.push_back(static_cast<float>(i) * 0.5f - 1.25f);
  return {{"w.f32", from_vector<float>(f, {2, 3})},
          {"w.f64", from_vector<double>({0.0, 1.0 / 3.0, 2.0 / 3.0})},
          {"idx", from_vector<int64_t>({-2, 0, 5, int64_t{1} << 40})},
          {"c.i32", from_vector<int32_t>({-7, 8, 9, -10}, {2, 2})},
          {"q", from_vector<int8_t>({-128, 0, 127})},
          {"u", from_vector<uint8_t>({0, 255})},
          {"mask", from_vector<bool>({true, false, true})},
          {"empty", zeros({0, 4})},
          {"scalar", scalar_tensor(3.5, DType::Float64)}};
}

void expect_same(const StateDict& got, const StateDict& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, t] : want) {
    ASSERT_TRUE(got.contains(key)) << key;
    const Tensor& g = got.at(key);
    EXPECT_EQ(g.dtype(), t.dtype()) << key;
    EXPECT_EQ(g.sizes(), t.sizes()) << key;
    EXPECT_EQ(to_vector<double>(g), to_vector<double>(t)) << key;
  }
}

std::string load_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { from_safetensors_bytes(bytes, "bad.safetensors"); });
}

}  // namespace

TEST_F(SafetensorsTest, RoundTripsAllDtypesShapesAndLayouts) {
  StateDict dict = reference_tensors();
  dict.insert("transposed", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).t());  // not contiguous
  save(dict, path("all.safetensors"), {{"epoch", "3"}});
  CheckpointMetadata meta;
  StateDict back = load(path("all.safetensors"), &meta);
  expect_same(back, dict);
  EXPECT_EQ(meta, (CheckpointMetadata{{"epoch", "3"}}));
  EXPECT_EQ(to_vector<float>(back.at("transposed")), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  std::vector<std::string> keys = back.keys();
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST_F(SafetensorsTest, ModuleStateDictRoundTrip) {
  Net source;
  fill(source.layer1->at<Block>(0)->a2->weight, 2.5f);
  save(source.state_dict(), path("net.safetensors"));
  Net target;
  target.load_state_dict(load(path("net.safetensors")));
  EXPECT_EQ(to_vector<float>(target.layer1->at<Block>(0)->a2->weight), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(target.stem->calls.dtype(), DType::Int64);
}

// Byte vectors from the Rust safetensors crate's own unit tests (tensor.rs).
TEST_F(SafetensorsTest, BytesMatchTheReferenceImplementation) {
  const auto data = f32_bytes({0, 1, 2, 3, 4, 5});
  auto with_data = [&](std::vector<uint8_t> prefix) {
    prefix.insert(prefix.end(), data.begin(), data.end());
    return prefix;
  };
  EXPECT_EQ(to_safetensors_bytes({{"attn.0", from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3})}}),
            with_data(file_with(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})")));
  EXPECT_EQ(to_safetensors_bytes({{"attn0", from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 1, 2, 3})}}),
            with_data(file_with(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )")));
  EXPECT_EQ(to_safetensors_bytes({}), file_with("{}      "));
  EXPECT_EQ(to_safetensors_bytes({}, {{"framework", "pt"}}), file_with(R"({"__metadata__":{"framework":"pt"}}     )"));
}

TEST_F(SafetensorsTest, LayoutIsByDescendingDtypeThenName) {
  StateDict d{{"b", zeros({1})}, {"flag", from_vector<bool>({false})}, {"a", zeros({1})}, {"n", zeros({1}, DType::Int64)},
              {"d", zeros({1}, DType::Float64)}, {"i", zeros({1}, DType::Int32)}};
  const auto bytes = to_safetensors_bytes(d);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header,
            R"({"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
            R"("d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[20,24]},)"
            R"("i":{"dtype":"I32","shape":[1],"data_offsets":[24,28]},)"
            R"("flag":{"dtype":"BOOL","shape":[1],"data_offsets":[28,29]}}    )");
}

TEST_F(SafetensorsTest, SaveRejectsReservedKeysAndBadUtf8) {
  EXPECT_EQ(error_of([&] { save({{"__metadata__", ones({1})}}, path("x")); }),
            "save: '__metadata__' is reserved and cannot name a tensor");
  EXPECT_THAT(error_of([&] { save({{"bad\xff", ones({1})}}, path("x")); }),
              HasSubstr("save: a tensor name or metadata string is not valid UTF-8"));
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(SafetensorsTest, LoadErrorsNameTheFile) {
  EXPECT_THAT(error_of([&] { load(path("missing.safetensors")); }),
              HasSubstr("load: cannot open '" + path("missing.safetensors") + "': No such file or directory"));
  EXPECT_THAT(error_of([&] { load(dir_.string()); }), HasSubstr("is not a regular file"));
  write_bytes(path("short.safetensors"), {1, 2, 3});
  EXPECT_EQ(error_of([&] { load(path("short.safetensors")); }),
            "load: '" + path("short.safetensors") +
                "': 3 bytes is too short for a safetensors file (the header length alone is 8)");
}

TEST_F(SafetensorsTest, EveryTruncationIsAnError) {
  const StateDict small{{"w", from_vector<float>({1, 2})}, {"m", from_vector<bool>({true, false, true})},
                        {"i", from_vector<int64_t>({7})}};
  const auto full = to_safetensors_bytes(small, {{"k", "v"}});
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string p = path("cut.safetensors");
    write_bytes(p, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len)));
    EXPECT_THAT(error_of([&] { load(p); }), HasSubstr("load: '" + p + "': ")) << "length " << len;
  }
  write_bytes(path("whole.safetensors"), full);
  expect_same(load(path("whole.safetensors")), small);
}

TEST_F(SafetensorsTest, HeaderLengthMustBeSane) {
  auto huge = le64(uint64_t{1} << 63);
  EXPECT_EQ(load_error(huge), "load: 'bad.safetensors': header length 9223372036854775808 exceeds the limit of "
                              "100000000 bytes");
  auto past = file_with("{}");
  past[0] = 50;
  EXPECT_EQ(load_error(past),
            "load: 'bad.safetensors': header length 50 runs past the end of the file (10 bytes)");
  EXPECT_EQ(load_error(file_with("")), "load: 'bad.safetensors': the header does not start with '{'");
  EXPECT_EQ(load_error(file_with("[]")), "load: 'bad.safetensors': the header does not start with '{'");
}

TEST_F(SafetensorsTest, HeaderMustBeValidJson) {
  EXPECT_THAT(load_error(file_with(R"({"a": [)")),
              HasSubstr("load: 'bad.safetensors': the header is not valid JSON: [json.exception.parse_error"));
  EXPECT_THAT(load_error(file_with("{\"a\xff\": 1}")), HasSubstr("the header is not valid JSON"));
  EXPECT_EQ(load_error(file_with(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{}})", f32_bytes({1}))),
            "load: 'bad.safetensors': the header repeats the key 'a'");
  EXPECT_EQ(load_error(file_with(R"({"a":)" + std::string(40, '[') + std::string(40, ']') + "}")),
            "load: 'bad.safetensors': the JSON header nests deeper than 16 levels");
  EXPECT_EQ(load_error(file_with(R"({"__metadata__":{"k":1}})")),
            "load: 'bad.safetensors': __metadata__ value of 'k' is not a string");
  EXPECT_TRUE(from_safetensors_bytes(file_with(R"({"__metadata__":null})"), "ok").empty());
}

TEST_F(SafetensorsTest, TensorEntriesAreValidated) {
  auto entry = [](const std::string& body) { return R"({"t":)" + body + "}"; };
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F16","shape":[1],"data_offsets":[0,2]})"), {0, 0})),
            "load: 'bad.safetensors': tensor 't': unknown dtype 'F16' (qflow reads BOOL, U8, I8, I32, I64, F32, F64)");
  EXPECT_EQ(load_error(file_with(entry(R"({"shape":[1],"data_offsets":[0,4]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': missing or non-string \"dtype\"");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': shape entries must be non-negative integers");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': shape entries must be non-negative integers");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
                                 f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': the shape's byte size overflows");
  // Empty, but its strides (the product of the non-zero dims) would overflow int64.
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]})"))),
            "load: 'bad.safetensors': tensor 't': the shape's byte size overflows");
  EXPECT_EQ(from_safetensors_bytes(file_with(entry(R"({"dtype":"F32","shape":[0,4294967296],"data_offsets":[0,0]})")),
                                   "ok")
                .at("t")
                .sizes(),
            (std::vector<int64_t>{0, 4294967296}));
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': \"data_offsets\" must be two non-negative integers");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': shape [2] of F32 needs 8 bytes but data_offsets [0, 4] hold 4");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': data_offsets [4, 0] end before they begin");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': data_offsets [0, 8] run past the end of the data buffer (4 bytes)");
  EXPECT_EQ(load_error(file_with(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,)"
                                       R"(18446744073709551616]})"),
                                 f32_bytes({1}))),
            "load: 'bad.safetensors': tensor 't': \"data_offsets\" must be two non-negative integers");
}

TEST_F(SafetensorsTest, RangesMustTileTheDataBufferExactly) {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_EQ(load_error(file_with("{" + a + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 f32_bytes({1, 2}))),
            "load: 'bad.safetensors': tensors 'a' [0, 8) and 'b' [4, 8) overlap");
  EXPECT_EQ(load_error(file_with(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32_bytes({1, 2}))),
            "load: 'bad.safetensors': bytes [0, 4) of the data buffer belong to no tensor");
  EXPECT_EQ(load_error(file_with("{" + a + "}", f32_bytes({1, 2, 3}))),
            "load: 'bad.safetensors': 4 bytes of trailing garbage after the last tensor");
  EXPECT_EQ(load_error(file_with("{}", {7})),
            "load: 'bad.safetensors': 1 bytes of trailing garbage after the last tensor");
  // Zero-size tensors may sit at any boundary; unknown fields are ignored like the Python library does.
  StateDict ok = from_safetensors_bytes(
      file_with("{" + a + R"(,"z":{"dtype":"I64","shape":[0,3],"data_offsets":[8,8],"note":1}})", f32_bytes({1, 2})),
      "ok");
  EXPECT_EQ(ok.at("z").sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(to_vector<float>(ok.at("a")), (std::vector<float>{1, 2}));
}

TEST_F(SafetensorsTest, BoolBytesAreNormalised) {
  StateDict d = from_safetensors_bytes(
      file_with(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {0, 1, 7}), "bools");
  EXPECT_EQ(to_vector<uint8_t>(d.at("m").to(DType::UInt8)), (std::vector<uint8_t>{0, 1, 1}));
}

TEST_F(SafetensorsTest, FailedWriteLeavesThePreviousFileIntact) {
  const std::string p = path("model.safetensors");
  save({{"w", ones({4})}}, p);
  const auto before = read_bytes(p);

  // Simulate a full disk: a file-size limit makes write() fail with EFBIG part-way through.
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string err = error_of([&] { save({{"w", ones({4096})}}, p); });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  // The 4096 floats make a 16456-byte file; the limit lets the first 1000 bytes through.
  EXPECT_EQ(err, "save: writing '" + p + "' failed after 1000 of 16456 bytes: File too large (any previous file at that "
                 "path is unchanged)");
  EXPECT_EQ(read_bytes(p), before);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.path() == p ? 0 : 1;
  EXPECT_EQ(entries, 0) << "the temporary file was not removed";

  EXPECT_THAT(error_of([&] { save({{"w", ones({1})}}, path("no/such/dir/m.safetensors")); }),
              HasSubstr("save: cannot create a temporary file next to '" + path("no/such/dir/m.safetensors") +
                        "': No such file or directory"));
  save({{"w", full({2}, 3.0f)}}, p);  // a successful save replaces the file
  EXPECT_EQ(to_vector<float>(load(p).at("w")), (std::vector<float>{3, 3}));
}

namespace {

// The Python side of the interop tests: a writer that follows the safetensors library's
// serializer (layout by descending dtype then name, __metadata__ first, compact JSON, space
// padding to 8 bytes) and an independent reader, both on PyTorch 1.13 (Debian's python3-torch;
// python3-safetensors is not packaged in Debian 12).
constexpr const char* kPythonScript = R"PY(
import json, struct, sys, torch
ORDER = {torch.bool: 0, torch.uint8: 1, torch.int8: 2, torch.int32: 9, torch.float32: 11, torch.float64: 12,
         torch.int64: 13}
CODE = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int32: "I32", torch.float32: "F32",
        torch.float64: "F64", torch.int64: "I64"}

def reference():
    return {
        "w.f32": (torch.arange(6, dtype=torch.float32) * 0.5 - 1.25).reshape(2, 3),
        "w.f64": torch.arange(3, dtype=torch.float64) / 3,
        "idx": torch.tensor([-2, 0, 5, 1 << 40], dtype=torch.int64),
        "c.i32": torch.tensor([[-7, 8], [9, -10]], dtype=torch.int32),
        "q": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u": torch.tensor([0, 255], dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
    }

def write(path, tensors, metadata):
    items = sorted(tensors.items(), key=lambda kv: (-ORDER[kv[1].dtype], kv[0].encode()))
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in items:
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": CODE[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    data, dtypes, out = raw[8 + n:], {v: k for k, v in CODE.items()}, {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dt = dtypes[info["dtype"]]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dt) if end > begin else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"])
    return out, meta

mode, path = sys.argv[1], sys.argv[2]
if mode == "write":
    write(path, reference(), {"format": "pt", "source": "python"})
else:
    got, meta = read(path)
    assert meta == {"format": "pt", "source": "qflow"}, meta
    ref = reference()
    assert sorted(got) == sorted(ref), (sorted(got), sorted(ref))
    for k, v in ref.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and torch.equal(got[k], v), (k, got[k], v)
)PY";

bool python_with_torch() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return ok;
}

}  // namespace

TEST_F(SafetensorsTest, LoadsAFileWrittenByPython) {
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  const std::string script = path("interop.py");
  std::ofstream(script) << kPythonScript;
  const std::string file = path("from_python.safetensors");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " write " + file).c_str()), 0);
  CheckpointMetadata meta;
  expect_same(load(file, &meta), reference_tensors());
  EXPECT_EQ(meta, (CheckpointMetadata{{"format", "pt"}, {"source", "python"}}));
  // Byte for byte what qflow writes for the same tensors.
  EXPECT_EQ(read_bytes(file), to_safetensors_bytes(reference_tensors(), meta));
}

TEST_F(SafetensorsTest, PythonReadsAFileWrittenByQflow) {
  if (!python_with_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch is not available";
  const std::string script = path("interop.py");
  std::ofstream(script) << kPythonScript;
  const std::string file = path("from_qflow.safetensors");
  save(reference_tensors(), file, {{"format", "pt"}, {"source", "qflow"}});
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " check " + file).c_str()), 0);
}
