#pragma once
// Helpers shared by the fx tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qflow/fx/fx.h"
#include "qflow/qflow.h"
#include "error_of.h"

namespace qflow::fx::detail {
// Corrupts nodes on purpose so the lint tests can show that every broken invariant is caught
// (the public API keeps them by construction). See Note [Users by construction].
struct NodeTestAccess {
  static void set_name(Node& n, std::string name) { n.name_ = std::move(name); }
  static std::vector<Node*>& users(Node& n) { return n.users_; }
};
}  // namespace qflow::fx::detail

namespace fxtest {

using namespace qflow;

using ::qflow::testing_util::error_of;  // tests/error_of.h

/// The message of the fx::TraceError `fn` throws; fails the test for any other outcome.
template <class Fn>
std::string trace_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const fx::TraceError& e) {
    return e.message();
  } catch (const Error& e) {
    ADD_FAILURE() << "expected fx::TraceError, got qflow::Error: " << e.message();
    return "";
  }
  ADD_FAILURE() << "expected fx::TraceError, nothing was thrown";
  return "";
}

inline std::vector<std::string> names_of(const fx::Graph& g) {
  std::vector<std::string> out;
  for (const fx::Node* n : g) out.push_back(n->name());
  return out;
}

inline std::vector<std::string> names_of(const std::vector<fx::Node*>& nodes) {
  std::vector<std::string> out;
  for (const fx::Node* n : nodes) out.push_back(n->name());
  return out;
}

/// Exact element-wise equality (same shape, same dtype, same bits for every value).
inline bool same_values(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  return to_vector<double>(a) == to_vector<double>(b);
}

}  // namespace fxtest
