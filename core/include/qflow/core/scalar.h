#pragma once
// Scalar: a number argument (alpha, fill value, clamp bound) that keeps its kind, so
// `int_tensor + 1` stays integral and `int_tensor + 1.5` promotes to float like PyTorch.
#include <cstdint>
#include <type_traits>

#include "qflow/core/dtype.h"

namespace qflow {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}  // NOLINT: implicit by design
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(static_cast<double>(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ != Kind::Float; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(to_double());
    else return kind_ == Kind::Float ? static_cast<T>(d_) : static_cast<T>(i_);
  }
  /// The dtype a 0-dim tensor holding this scalar would have (bool, int64 or float32).
  DType default_dtype() const;
  bool operator==(const Scalar& o) const { return kind_ == o.kind_ && (kind_ == Kind::Float ? d_ == o.d_ : i_ == o.i_); }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace qflow

template <>
struct fmt::formatter<qflow::Scalar> : fmt::formatter<std::string_view> {
  auto format(const qflow::Scalar& s, format_context& ctx) const {
    switch (s.kind()) {
      case qflow::Scalar::Kind::Bool: return fmt::format_to(ctx.out(), "{}", s.to_bool());
      case qflow::Scalar::Kind::Int: return fmt::format_to(ctx.out(), "{}", s.to_int());
      default: return fmt::format_to(ctx.out(), "{}", s.to_double());
    }
  }
};
