#pragma once
// The message of the qflow::Error a call throws, shared by the tests of error paths.
#include <functional>
#include <string>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// The message of the qflow::Error `fn` throws, or "" when it throws nothing (so
/// `EXPECT_FALSE(error_of(...).empty())` fails when nothing was thrown).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace qflow::testing_util
