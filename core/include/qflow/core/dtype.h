#pragma once
// Element types and the one place that maps them to C++ types.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "qflow/core/error.h"

namespace qflow {

enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float32, Float64 };

constexpr int kNumDTypes = 7;

/// Bytes per element.
size_t element_size(DType t);
/// PyTorch-style name: "float32", "int64", "bool", ...
std::string_view dtype_name(DType t);
/// Parses a name produced by dtype_name; throws qflow::Error for anything else.
DType dtype_from_name(std::string_view name);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool = false);
/// Result dtype of a binary op between two tensors (PyTorch's promotion lattice).
DType promote_types(DType a, DType b);

template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <typename T> inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

template <typename T> struct TypeTag { using type = T; };

/// Calls fn(TypeTag<T>{}) with the C++ type of `t`:
///   visit_dtype(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <typename Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::Bool: return fn(TypeTag<bool>{});
    case DType::UInt8: return fn(TypeTag<uint8_t>{});
    case DType::Int8: return fn(TypeTag<int8_t>{});
    case DType::Int32: return fn(TypeTag<int32_t>{});
    case DType::Int64: return fn(TypeTag<int64_t>{});
    case DType::Float32: return fn(TypeTag<float>{});
    case DType::Float64: return fn(TypeTag<double>{});
  }
  QFLOW_ASSERT(false, "unknown dtype {}", static_cast<int>(t));
}

/// Like visit_dtype, restricted to float32/float64; other dtypes are a user error for `op`.
template <typename Fn>
decltype(auto) visit_floating(DType t, std::string_view op, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn(TypeTag<float>{});
    case DType::Float64: return fn(TypeTag<double>{});
    default: QFLOW_FAIL("{}: expected a floating point tensor, got {}", op, dtype_name(t));
  }
}

}  // namespace qflow

template <>
struct fmt::formatter<qflow::DType> : fmt::formatter<std::string_view> {
  auto format(qflow::DType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(qflow::dtype_name(t), ctx);
  }
};
