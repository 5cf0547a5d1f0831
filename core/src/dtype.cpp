#include "qflow/core/dtype.h"

#include <array>

namespace qflow {

namespace {
struct DTypeInfo {
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo{{
    {"bool", 1}, {"uint8", 1}, {"int8", 1}, {"int32", 4}, {"int64", 8}, {"float32", 4}, {"float64", 8},
}};
const DTypeInfo& info(DType t) {
  const auto i = static_cast<size_t>(t);
  QFLOW_ASSERT(i < kInfo.size(), "unknown dtype {}", i);
  return kInfo[i];
}
}  // namespace

size_t element_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

DType dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "long") return DType::Int64;
  if (name == "int") return DType::Int32;
  QFLOW_FAIL("unknown dtype name '{}' (expected one of bool, uint8, int8, int32, int64, float32, float64)", name);
}

bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::Bool: return include_bool;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: return true;
    default: return false;
  }
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) || is_floating(b)) {
    if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
    return DType::Float32;
  }
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  // uint8 with int8 does not fit either: PyTorch gives int16; we have no int16, use int32.
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8)) return DType::Int32;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

}  // namespace qflow
