#pragma once
// The message of the qflow::Error a call throws, shared by the tests of error paths.
#include <functional>
#include <string>

#include "qflow/qflow.h"

namespace qflow::testing_util {

/// The message of the qflow::Error `fn` throws, or "<no error>" when it throws nothing.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "<no error>";
}

}  // namespace qflow::testing_util
