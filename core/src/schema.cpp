#include "qflow/core/schema.h"

#include <cctype>
#include <charconv>

namespace qflow {

namespace {

// A small recursive-descent parser over the schema text.
class SchemaParser {
 public:
  explicit SchemaParser(std::string_view text) : text_(text) {}

  OpSchema parse() {
    OpSchema s;
    std::string full = identifier();
    if (auto dot = full.find('.'); dot != std::string::npos) {
      s.name = full.substr(0, dot);
      s.overload = full.substr(dot + 1);
    } else {
      s.name = full;
    }
    expect('(');
    bool keyword_only = false;
    while (!peek(')')) {
      if (!s.args.empty()) expect(',');
      if (peek('*')) {
        ++pos_;
        keyword_only = true;
        continue;
      }
      ArgSpec a = arg(/*named=*/true);
      a.keyword_only = keyword_only;
      s.args.push_back(std::move(a));
    }
    expect(')');
    expect('-');
    expect('>');
    if (peek('(')) {
      ++pos_;
      while (!peek(')')) {
        if (!s.returns.empty()) expect(',');
        s.returns.push_back(arg(/*named=*/false));
      }
      expect(')');
    } else {
      s.returns.push_back(arg(/*named=*/false));
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected trailing text");
    return s;
  }

 private:
  ArgSpec arg(bool named) {
    ArgSpec a;
    const std::string type = identifier();
    if (type == "Tensor") a.type = ArgType::Tensor;
    else if (type == "Scalar") a.type = ArgType::Scalar;
    else if (type == "int" || type == "SymInt") a.type = ArgType::Int;
    else if (type == "bool") a.type = ArgType::Bool;
    else if (type == "float") a.type = ArgType::Float;
    else if (type == "str") a.type = ArgType::String;
    else if (type == "ScalarType") a.type = ArgType::DType;
    else fail("unknown type '" + type + "'");
    if (peek('(')) {  // alias annotation (a) or (a!)
      ++pos_;
      skip_space();
      a.alias = text_[pos_++];
      if (peek('!')) {
        ++pos_;
        a.is_write = true;
      }
      expect(')');
    }
    if (peek('[')) {
      ++pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      expect(']');
      if (a.type == ArgType::Tensor) a.type = ArgType::TensorList;
      else if (a.type == ArgType::Int) a.type = ArgType::IntList;
      else fail("only Tensor[] and int[] lists are supported");
    }
    if (peek('?')) {
      ++pos_;
      a.optional = true;
    }
    skip_space();
    if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      a.name = identifier();
    } else if (named) {
      fail("argument needs a name");
    }
    if (peek('=')) {
      ++pos_;
      a.default_value = default_value(a);
    }
    return a;
  }

  Value default_value(const ArgSpec& a) {
    skip_space();
    if (consume_word("None")) {
      if (!a.optional) fail("None default for a non-optional argument");
      return Value();
    }
    if (consume_word("True")) return Value(true);
    if (consume_word("False")) return Value(false);
    if (peek('[')) {
      ++pos_;
      SymIntList list;
      while (!peek(']')) {
        if (!list.empty()) expect(',');
        list.push_back(SymInt(static_cast<int64_t>(number())));
      }
      expect(']');
      return Value(list);
    }
    if (peek('"')) {
      ++pos_;
      const size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"') ++pos_;
      if (pos_ == text_.size()) fail("unterminated string");
      return Value(std::string(text_.substr(start, pos_++ - start)));
    }
    if (a.type == ArgType::DType) return Value(dtype_from_name(identifier()));
    const double d = number();
    switch (a.type) {
      case ArgType::Int:
        return Value(static_cast<int64_t>(d));
      case ArgType::IntList:  // "int[2] stride=1" means [1, 1]; keep one value, kernels expand it
        return Value(SymIntList{SymInt(static_cast<int64_t>(d))});
      case ArgType::Float:
        return Value(d);
      case ArgType::Scalar:
        return last_number_was_integral_ ? Value(Scalar(static_cast<int64_t>(d))) : Value(Scalar(d));
      default:
        fail("numeric default for a non-numeric argument");
    }
  }

  double number() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || std::string_view("+-.eE").find(text_[pos_]) != std::string_view::npos)) ++pos_;
    const std::string_view s = text_.substr(start, pos_ - start);
    if (s.empty()) fail("expected a number");
    last_number_was_integral_ = s.find_first_of(".eE") == std::string_view::npos;
    return std::stod(std::string(s));
  }

  std::string identifier() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.')) ++pos_;
    if (start == pos_) fail("expected an identifier");
    return std::string(text_.substr(start, pos_ - start));
  }

  bool consume_word(std::string_view w) {
    skip_space();
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  [[noreturn]] void fail(const std::string& why) {
    QFLOW_FAIL("bad op schema \"{}\" at position {}: {}", text_, pos_, why);
  }

  std::string_view text_;
  size_t pos_ = 0;
  bool last_number_was_integral_ = true;
};

bool value_fits(const ArgSpec& spec, const Value& v) {
  if (v.is_none()) return spec.optional;
  switch (spec.type) {
    case ArgType::Tensor: return v.is_tensor();
    case ArgType::TensorList: return v.is_tensor_list();
    case ArgType::Scalar: return v.is_scalar() || v.is_int() || v.is_double() || v.is_bool();
    case ArgType::Int: return v.is_int() || (v.is_scalar() && v.scalar().is_integral());
    case ArgType::IntList: return v.is_int_list();
    case ArgType::Bool: return v.is_bool();
    case ArgType::Float: return v.is_double() || v.is_int() || v.is_scalar();
    case ArgType::String: return v.is_string();
    case ArgType::DType: return v.is_dtype();
  }
  return false;
}

}  // namespace

std::string_view arg_type_name(ArgType t) {
  static constexpr std::string_view kNames[] = {"Tensor", "Tensor[]", "Scalar", "int", "int[]", "bool", "float", "str", "ScalarType"};
  return kNames[static_cast<size_t>(t)];
}

OpSchema parse_schema(std::string_view text) { return SchemaParser(text).parse(); }

std::optional<size_t> OpSchema::mutated_arg() const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].is_write) return i;
  return std::nullopt;
}

bool OpSchema::returns_view() const {
  return !returns.empty() && returns[0].alias.has_value() && !returns[0].is_write;
}

std::optional<size_t> OpSchema::arg_index(std::string_view n) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == n) return i;
  return std::nullopt;
}

std::string OpSchema::to_string() const {
  auto render = [](const ArgSpec& a) {
    std::string s(arg_type_name(a.type));
    if (a.alias) {
      const std::string ann = fmt::format("({}{})", *a.alias, a.is_write ? "!" : "");
      // "Tensor[]" keeps the brackets after the annotation, as in PyTorch.
      s = a.type == ArgType::TensorList ? "Tensor" + ann + "[]" : s + ann;
    }
    if (a.optional) s += "?";
    if (!a.name.empty()) s += " " + a.name;
    if (a.default_value) s += "=" + describe(*a.default_value);
    return s;
  };
  std::vector<std::string> args_s, rets_s;
  bool star = false;
  for (const auto& a : args) {
    if (a.keyword_only && !star) {
      args_s.push_back("*");
      star = true;
    }
    args_s.push_back(render(a));
  }
  for (const auto& r : returns) rets_s.push_back(render(r));
  const std::string rets = returns.size() == 1 ? rets_s[0] : fmt::format("({})", fmt::join(rets_s, ", "));
  return fmt::format("{}({}) -> {}", full_name(), fmt::join(args_s, ", "), rets);
}

void normalize_args(const OpSchema& schema, Stack& args) {
  QFLOW_CHECK(args.size() <= schema.args.size(), "{}: expected at most {} arguments, got {}", schema.full_name(),
              schema.args.size(), args.size());
  for (size_t i = args.size(); i < schema.args.size(); ++i) {
    const ArgSpec& spec = schema.args[i];
    QFLOW_CHECK(spec.default_value.has_value(), "{}: missing argument '{}' ({})", schema.full_name(), spec.name,
                arg_type_name(spec.type));
    args.push_back(*spec.default_value);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = schema.args[i];
    QFLOW_CHECK(value_fits(spec, args[i]), "{}: argument '{}' expects {}{}, got {}", schema.full_name(), spec.name,
                arg_type_name(spec.type), spec.optional ? "?" : "", args[i].kind_name());
  }
}

}  // namespace qflow
