#pragma once
// Host time per op: where a step's time goes before any kernel runs.
//
// Note [Op profiler]
// An OpProfiler times every op its thread dispatches while it lives — the user's ops, the
// backward ops the autograd engine calls, the optimizer's — with a dispatch layer above all
// others (kProfileKey): an op's time includes autograd's recording, the allocation of its
// outputs and its kernel, which on a GPU is the launch alone (the kernel runs later, on the
// device). So on a GPU the table says what a step costs the host, the bound of a step whose
// kernels are short (issue 33: 8-13 ms of host work in a 13-23 ms ResNet18 step on an H100);
// on the CPU it is where the time goes, kernels included. Ops a kernel calls internally run
// below every layer and count as the calling op's own time; an op called by another dispatched
// op (a composite's parts) counts in both the caller's total and its own, and the caller's
// `self` time excludes it. Time between ops (the autograd engine's bookkeeping, the caller's
// code) is no op's: `wall` beside the ops' sum shows how much that is.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qflow {

struct OpProfileRow {
  std::string op;
  int64_t calls = 0;
  double total_us = 0;  // inclusive of the ops it dispatched
  double self_us = 0;   // without them
};

/// Times the ops dispatched on this thread from construction to destruction (one profiler per
/// thread at a time; a second throws).
class OpProfiler {
 public:
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  /// One row per op seen, by self time, largest first.
  std::vector<OpProfileRow> rows() const;
  /// Seconds since construction.
  double wall_seconds() const;
  /// A table of the `top` rows by self time, with calls, total and self ms, µs per call and
  /// share of the ops' time, then the ops' sum against the wall time.
  std::string table(size_t top = 25) const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace qflow
