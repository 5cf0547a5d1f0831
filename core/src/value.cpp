#include "qflow/core/value.h"

namespace qflow {

namespace {
template <typename T>
const T& get_or_throw(const Value::Storage& v, std::string_view want, std::string_view have) {
  const T* p = std::get_if<T>(&v);
  QFLOW_CHECK(p != nullptr, "expected a value of kind {}, got {}", want, have);
  return *p;
}
}  // namespace

const Tensor& Value::tensor() const { return get_or_throw<Tensor>(v_, "Tensor", kind_name()); }
Tensor& Value::tensor() { return const_cast<Tensor&>(get_or_throw<Tensor>(v_, "Tensor", kind_name())); }
const TensorList& Value::tensor_list() const { return get_or_throw<TensorList>(v_, "Tensor[]", kind_name()); }
const SymInt& Value::sym_int() const { return get_or_throw<SymInt>(v_, "int", kind_name()); }
const SymIntList& Value::sym_int_list() const { return get_or_throw<SymIntList>(v_, "int[]", kind_name()); }
const std::string& Value::string() const { return get_or_throw<std::string>(v_, "str", kind_name()); }
DType Value::dtype() const { return get_or_throw<DType>(v_, "ScalarType", kind_name()); }

Scalar Value::scalar() const {
  if (auto* s = std::get_if<Scalar>(&v_)) return *s;
  if (auto* i = std::get_if<SymInt>(&v_)) return Scalar(i->expect_int("using a symbolic size as a scalar"));
  if (auto* b = std::get_if<bool>(&v_)) return Scalar(*b);
  if (auto* d = std::get_if<double>(&v_)) return Scalar(*d);
  QFLOW_FAIL("expected a value of kind Scalar, got {}", kind_name());
}

int64_t Value::to_int() const {
  if (auto* s = std::get_if<Scalar>(&v_); s && s->is_integral()) return s->to_int();
  return sym_int().expect_int("an integer argument is required");
}

IntList Value::int_list() const { return expect_ints(sym_int_list(), "an integer list argument is required"); }

bool Value::to_bool() const {
  if (auto* s = std::get_if<Scalar>(&v_)) return s->to_bool();
  return get_or_throw<bool>(v_, "bool", kind_name());
}

double Value::to_double() const {
  if (auto* s = std::get_if<Scalar>(&v_)) return s->to_double();
  if (auto* i = std::get_if<SymInt>(&v_)) return static_cast<double>(i->expect_int("a number is required"));
  return get_or_throw<double>(v_, "float", kind_name());
}

std::string_view Value::kind_name() const {
  static constexpr std::string_view kNames[] = {"None", "Tensor", "Tensor[]", "Scalar", "int",
                                                "int[]", "bool", "float", "str", "ScalarType"};
  return kNames[v_.index()];
}

std::string describe(const Value& v) {
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();
    if (!t.defined()) return "Tensor(undefined)";
    return fmt::format("Tensor{} {}", t.sizes(), t.dtype());
  }
  if (v.is_tensor_list()) {
    std::vector<std::string> parts;
    for (const auto& t : v.tensor_list()) parts.push_back(describe(Value(t)));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
  if (v.is_scalar()) return fmt::format("{}", v.scalar());
  if (v.is_int()) return v.sym_int().is_symbolic() ? fmt::format("sym({})", v.sym_int().hint()) : fmt::format("{}", v.sym_int().hint());
  if (v.is_int_list()) {
    std::vector<std::string> parts;
    for (const auto& s : v.sym_int_list()) parts.push_back(s.is_symbolic() ? fmt::format("sym({})", s.hint()) : fmt::format("{}", s.hint()));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  }
  if (v.is_bool()) return v.to_bool() ? "True" : "False";
  if (v.is_double()) return fmt::format("{}", v.to_double());
  if (v.is_string()) return fmt::format("\"{}\"", v.string());
  if (v.is_dtype()) return std::string(dtype_name(v.dtype()));
  return "None";
}

}  // namespace qflow
