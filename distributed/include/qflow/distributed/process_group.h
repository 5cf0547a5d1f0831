#pragma once
// The processes of a data-parallel job and the collectives between them (Open MPI).
//
// Note [Process group]
// `mpirun -np N prog` starts N copies of a program; each finds its rank and the world size
// in the environment mpirun sets, and ProcessGroup::world() starts MPI on first use. A
// program started without mpirun is a world of one: rank 0, no MPI call is made, and every
// collective returns its input unchanged — so the same code trains on one process or many.
//
// Every collective is started non-blocking and then waited on with a deadline
// (QFLOW_DIST_TIMEOUT seconds, 300 by default): a rank that stops answering makes the
// others abort with a message naming the collective, never hang. A rank that dies is seen
// by mpirun, which stops the job and names the rank; a rank that fails with an error calls
// abort(), which prints "rank r of N: message" and brings every process down.
//
// Collectives must be called in the same order on every rank of a communicator. Users of
// the world group that run at different points of a step (gradient buckets during backward,
// SyncBatchNorm and observers during forward) each take their own duplicate(), so their
// order never interleaves.
#include <chrono>
#include <memory>
#include <string>

#include "qflow/core/tensor.h"

namespace qflow {
class DeviceCommunicator;
}

namespace qflow::distributed {

enum class ReduceOp { Sum, Min, Max };

/// True when this process was started by mpirun (or another MPI launcher).
bool launched_by_mpi();

/// A collective in flight. wait() returns when it is done, drives MPI's progress while
/// waiting, and aborts the job when the deadline passes (Note [Process group]).
class Work {
 public:
  Work();
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  ~Work();
  /// Done? Advances the collective (MPI only moves non-blocking collectives inside calls).
  bool test();
  void wait();
  bool pending() const { return impl_ != nullptr; }

 private:
  friend class ProcessGroup;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ProcessGroup {
 public:
  /// Every process of the job (MPI_COMM_WORLD); starts MPI on first call when launched by
  /// mpirun, and finalizes it at exit.
  static ProcessGroup& world();

  ProcessGroup(ProcessGroup&&) noexcept;
  ProcessGroup& operator=(ProcessGroup&&) noexcept;
  ~ProcessGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  /// A group of the same processes whose collectives never interleave with this one's.
  ProcessGroup duplicate() const;

  /// In place on a contiguous tensor (float32/64, int32/64, uint8, int8, bool). A tensor on a
  /// GPU goes through the device's communicator (NCCL), queued on its stream (Note
  /// [Collectives on a device]): the returned Work is already done for the host.
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum, const std::string& what = "all_reduce");
  [[nodiscard]] Work all_reduce_async(Tensor t, ReduceOp op, std::string what);
  /// Rank `root`'s values into `t` on every rank (same shape and dtype everywhere).
  void broadcast(Tensor& t, int root = 0, const std::string& what = "broadcast");
  /// Sum of `value` over the ranks (double precision).
  double sum(double value, const std::string& what = "sum");
  int64_t sum(int64_t value, const std::string& what = "sum");
  void barrier(const std::string& what = "barrier");

  /// "rank 1 of 2" (or "single process").
  std::string describe() const;

 private:
  ProcessGroup();
  /// The communicator of `device` for this group's ranks, made (collectively) at first use.
  DeviceCommunicator& device_communicator(Device device, const std::string& what);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

/// This process's rank among the job's processes on its machine (MPI_COMM_TYPE_SHARED); 0
/// without mpirun. qflow-train gives each process the GPU of this number.
int local_rank();

/// How long a collective may take before the job is aborted (QFLOW_DIST_TIMEOUT, seconds).
std::chrono::seconds collective_timeout();

/// Prints "qflow: rank r of N: message" to stderr and stops every process of the job with
/// exit status `code` (MPI_Abort); a single process just exits with `code`.
[[noreturn]] void abort(const std::string& message, int code = 1);

}  // namespace qflow::distributed
