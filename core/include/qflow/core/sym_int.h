#pragma once
// SymInt: an integer that may stand for a value only known when a traced graph runs.
//
// Note [Symbolic sizes]
// `x.view({x.size(0), -1})` must trace into a graph that runs at any batch size. So
// Tensor::size(d) returns a SymInt: a plain int64 for real tensors, or, for a tensor that a
// tracer owns, a handle to a SymNode the tracer created. Core never looks inside a SymNode:
// arithmetic on symbolic values and any attempt to turn one into a concrete integer are
// forwarded to the node, so the tracer records the arithmetic and refuses data-dependent
// uses (e.g. `if (x.size(0) > 3)`) with a clear error instead of specialising silently.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qflow {

class SymInt;

/// Implemented by a tracer (fx). `hint()` is the value seen while tracing.
class SymNode {
 public:
  virtual ~SymNode() = default;
  virtual int64_t hint() const = 0;
  /// Called when code needs a concrete integer from a symbolic one; throws or returns it.
  virtual int64_t guard_int(const char* why) const = 0;
  /// Arithmetic between SymInts where at least one is symbolic; op is one of + - * / %.
  virtual SymInt binary(char op, const SymInt& lhs, const SymInt& rhs) const = 0;
};

class SymInt {
 public:
  SymInt() = default;
  SymInt(int64_t v) : value_(v) {}  // NOLINT: implicit by design, ints are SymInts
  SymInt(int v) : value_(v) {}      // NOLINT
  SymInt(std::shared_ptr<const SymNode> node) : value_(node->hint()), node_(std::move(node)) {}

  bool is_symbolic() const { return node_ != nullptr; }
  const std::shared_ptr<const SymNode>& node() const { return node_; }
  /// The concrete value, or the tracing-time hint of a symbolic one (for shape rules).
  int64_t hint() const { return value_; }
  /// The concrete value; a symbolic value asks its node (a tracer refuses).
  int64_t expect_int(const char* why = "a concrete integer is required") const {
    return node_ ? node_->guard_int(why) : value_;
  }
  operator int64_t() const { return expect_int("converting a symbolic size to an integer"); }  // NOLINT

 private:
  int64_t value_ = 0;
  std::shared_ptr<const SymNode> node_;
};

using SymIntList = std::vector<SymInt>;

SymInt sym_binary(char op, const SymInt& a, const SymInt& b);

// Arithmetic and comparisons spelled out for the integer types user code mixes with sizes,
// so `x.size(1) * 2` or `i < x.size(0)` are never ambiguous.
#define QFLOW_SYMINT_ARITH(OP, CH)                                                           \
  inline SymInt operator OP(const SymInt& a, const SymInt& b) { return sym_binary(CH, a, b); } \
  inline SymInt operator OP(const SymInt& a, int b) { return sym_binary(CH, a, SymInt(b)); }   \
  inline SymInt operator OP(const SymInt& a, int64_t b) { return sym_binary(CH, a, SymInt(b)); } \
  inline SymInt operator OP(int a, const SymInt& b) { return sym_binary(CH, SymInt(a), b); }   \
  inline SymInt operator OP(int64_t a, const SymInt& b) { return sym_binary(CH, SymInt(a), b); }
QFLOW_SYMINT_ARITH(+, '+')
QFLOW_SYMINT_ARITH(-, '-')
QFLOW_SYMINT_ARITH(*, '*')
QFLOW_SYMINT_ARITH(/, '/')
QFLOW_SYMINT_ARITH(%, '%')
#undef QFLOW_SYMINT_ARITH

#define QFLOW_SYMINT_CMP(OP)                                                                        \
  inline bool operator OP(const SymInt& a, const SymInt& b) { return int64_t(a) OP int64_t(b); }     \
  inline bool operator OP(const SymInt& a, int b) { return int64_t(a) OP int64_t(b); }               \
  inline bool operator OP(const SymInt& a, int64_t b) { return int64_t(a) OP b; }                    \
  inline bool operator OP(const SymInt& a, size_t b) { return int64_t(a) OP int64_t(b); }            \
  inline bool operator OP(int a, const SymInt& b) { return int64_t(a) OP int64_t(b); }               \
  inline bool operator OP(int64_t a, const SymInt& b) { return a OP int64_t(b); }                    \
  inline bool operator OP(size_t a, const SymInt& b) { return int64_t(a) OP int64_t(b); }
QFLOW_SYMINT_CMP(==)
QFLOW_SYMINT_CMP(!=)
QFLOW_SYMINT_CMP(<)
QFLOW_SYMINT_CMP(<=)
QFLOW_SYMINT_CMP(>)
QFLOW_SYMINT_CMP(>=)
#undef QFLOW_SYMINT_CMP

/// Concrete values of a list (each symbolic entry is guarded).
std::vector<int64_t> expect_ints(const SymIntList& list, const char* why);
/// Hints of a list (shape rules use these; never guards).
std::vector<int64_t> hints(const SymIntList& list);
bool any_symbolic(const SymIntList& list);

}  // namespace qflow
