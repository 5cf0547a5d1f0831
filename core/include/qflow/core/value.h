#pragma once
// Value: one argument or result of a registered op (a typed variant), and Stack, the
// argument list every kernel and dispatch layer receives.
#include <string>
#include <variant>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow {

class Value {
 public:
  using Storage = std::variant<std::monostate, Tensor, TensorList, Scalar, SymInt, SymIntList,
                               bool, double, std::string, DType>;

  Value() = default;
  Value(std::nullopt_t) {}                                      // NOLINT
  Value(Tensor t) : v_(std::move(t)) {}                         // NOLINT
  Value(TensorList t) : v_(std::move(t)) {}                     // NOLINT
  Value(Scalar s) : v_(s) {}                                    // NOLINT
  Value(SymInt i) : v_(std::move(i)) {}                         // NOLINT
  Value(int64_t i) : v_(SymInt(i)) {}                           // NOLINT
  Value(int i) : v_(SymInt(i)) {}                               // NOLINT
  Value(SymIntList l) : v_(std::move(l)) {}                     // NOLINT
  Value(const IntList& l) : v_(SymIntList(l.begin(), l.end())) {}  // NOLINT
  Value(bool b) : v_(b) {}                                      // NOLINT
  Value(double d) : v_(d) {}                                    // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                    // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                  // NOLINT
  Value(DType d) : v_(d) {}                                     // NOLINT
  template <typename T>
  Value(const std::optional<T>& o) { if (o) *this = Value(*o); }  // NOLINT

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_tensor_list() const { return std::holds_alternative<TensorList>(v_); }
  bool is_scalar() const { return std::holds_alternative<Scalar>(v_); }
  bool is_int() const { return std::holds_alternative<SymInt>(v_); }
  bool is_int_list() const { return std::holds_alternative<SymIntList>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_dtype() const { return std::holds_alternative<DType>(v_); }

  const Tensor& tensor() const;
  Tensor& tensor();
  const TensorList& tensor_list() const;
  /// Scalars also accept ints, bools and doubles (schema "Scalar" is any number).
  Scalar scalar() const;
  const SymInt& sym_int() const;
  int64_t to_int() const;
  const SymIntList& sym_int_list() const;
  /// Concrete ints; symbolic entries are guarded (see Note [Symbolic sizes]).
  IntList int_list() const;
  bool to_bool() const;
  double to_double() const;
  const std::string& string() const;
  DType dtype() const;
  std::optional<Tensor> optional_tensor() const { return is_none() ? std::nullopt : std::optional<Tensor>(tensor()); }
  std::optional<Scalar> optional_scalar() const { return is_none() ? std::nullopt : std::optional<Scalar>(scalar()); }
  std::optional<int64_t> optional_int() const { return is_none() ? std::nullopt : std::optional<int64_t>(to_int()); }
  std::optional<DType> optional_dtype() const { return is_none() ? std::nullopt : std::optional<DType>(dtype()); }

  /// Name of the held kind ("Tensor", "int[]", "None", ...), for error messages.
  std::string_view kind_name() const;
  const Storage& storage() const { return v_; }
  Storage& storage() { return v_; }

 private:
  Storage v_;
};

using Stack = std::vector<Value>;

/// Short human-readable rendering of a value: tensors as "Tensor[2, 3] float32".
std::string describe(const Value& v);

}  // namespace qflow
