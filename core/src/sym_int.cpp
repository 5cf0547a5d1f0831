#include "qflow/core/sym_int.h"

#include "qflow/core/error.h"

namespace qflow {

SymInt sym_binary(char op, const SymInt& a, const SymInt& b) {
  if (a.is_symbolic()) return a.node()->binary(op, a, b);
  if (b.is_symbolic()) return b.node()->binary(op, a, b);
  const int64_t x = a.hint(), y = b.hint();
  switch (op) {
    case '+': return x + y;
    case '-': return x - y;
    case '*': return x * y;
    case '/':
      QFLOW_CHECK(y != 0, "integer division by zero in a size expression");
      return x / y;
    case '%':
      QFLOW_CHECK(y != 0, "integer modulo by zero in a size expression");
      return x % y;
  }
  QFLOW_ASSERT(false, "unknown SymInt op '{}'", op);
}

std::vector<int64_t> expect_ints(const SymIntList& list, const char* why) {
  std::vector<int64_t> out;
  out.reserve(list.size());
  for (const auto& s : list) out.push_back(s.expect_int(why));
  return out;
}

std::vector<int64_t> hints(const SymIntList& list) {
  std::vector<int64_t> out;
  out.reserve(list.size());
  for (const auto& s : list) out.push_back(s.hint());
  return out;
}

bool any_symbolic(const SymIntList& list) {
  for (const auto& s : list)
    if (s.is_symbolic()) return true;
  return false;
}

}  // namespace qflow
