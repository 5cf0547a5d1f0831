#pragma once
// fx::TraceError: what symbolic tracing throws when a program cannot become a graph (data-
// dependent control flow, reading a traced value, a traced size turned into a C++ integer).
#include "qflow/core/error.h"

namespace qflow::fx {

class TraceError : public Error {
 public:
  using Error::Error;
};

}  // namespace qflow::fx

/// QFLOW_TRACE_FAIL("fmt", ...): throws fx::TraceError with the source location.
#define QFLOW_TRACE_FAIL(...) throw ::qflow::fx::TraceError(::fmt::format(__VA_ARGS__), __FILE__, __LINE__)
