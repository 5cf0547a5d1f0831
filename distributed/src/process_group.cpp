// ProcessGroup over Open MPI; see Note [Process group].
#include "qflow/distributed/process_group.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <limits>
#include <string_view>
#include <thread>

#include "qflow/core/device_runtime.h"
#include "qflow/core/factory.h"

namespace qflow::distributed {
namespace {

bool env_set(const char* name) { return std::getenv(name) != nullptr; }

MPI_Datatype mpi_type(DType t, const std::string& what) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Bool: return MPI_C_BOOL;
  }
  QFLOW_FAIL("{}: unsupported dtype {}", what, t);
}

CollectiveOp collective_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return CollectiveOp::Sum;
    case ReduceOp::Min: return CollectiveOp::Min;
    case ReduceOp::Max: return CollectiveOp::Max;
  }
  QFLOW_FAIL("unknown reduce op");
}

MPI_Op mpi_op(ReduceOp op, DType t, const std::string& what) {
  if (t == DType::Bool) {  // logical: any / all
    QFLOW_CHECK(op != ReduceOp::Sum, "{}: cannot sum bool tensors", what);
    return op == ReduceOp::Max ? MPI_LOR : MPI_LAND;
  }
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  QFLOW_FAIL("{}: unknown reduce op", what);
}

void check_contiguous(const Tensor& t, const std::string& what) {
  QFLOW_CHECK(t.defined(), "{}: the tensor is undefined", what);
  QFLOW_CHECK(t.is_contiguous(), "{}: expected a contiguous tensor, got shape {} with strides {}", what, t.sizes(), t.strides());
  QFLOW_CHECK(t.numel() <= std::numeric_limits<int>::max(), "{}: {} elements exceed MPI's int count", what, t.numel());
}

void check_mpi(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  abort(fmt::format("{} failed: {}", what, std::string_view(text, static_cast<size_t>(len))));
}

void finalize_at_exit() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Finalize();
}

}  // namespace

bool launched_by_mpi() {
  // Open MPI's mpirun, PMIx launchers (srun, prterun) and MPICH's Hydra.
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_SIZE");
}

std::chrono::seconds collective_timeout() {
  if (const char* s = std::getenv("QFLOW_DIST_TIMEOUT")) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    QFLOW_CHECK(end != s && *end == '\0' && v > 0, "QFLOW_DIST_TIMEOUT must be a positive number of seconds, got '{}'", s);
    return std::chrono::seconds(v);
  }
  return std::chrono::seconds(300);
}

void abort(const std::string& message, int code) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::fprintf(stderr, "qflow: rank %d of %d: %s\n", rank, size, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::fprintf(stderr, "qflow: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

// ---- Work ------------------------------------------------------------------------------------------

struct Work::Impl {
  MPI_Request request = MPI_REQUEST_NULL;
  Tensor keep;  // the buffer MPI reads and writes until done
  std::string what;
};

Work::Work() = default;
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&&) noexcept = default;
Work::~Work() {
  // A collective cannot be cancelled; finishing it keeps its buffer alive while MPI uses it.
  if (impl_) wait();
}

bool Work::test() {
  if (!impl_) return true;
  int done = 0;
  check_mpi(MPI_Test(&impl_->request, &done, MPI_STATUS_IGNORE), impl_->what);
  if (done) impl_.reset();
  return done != 0;
}

void Work::wait() {
  if (!impl_) return;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + collective_timeout();
  // Spin first (a step's collectives finish in micro- to milliseconds), then poll gently so a
  // rank waiting for a slow peer (one writing a checkpoint) does not take a core from it.
  for (int polls = 0;; ++polls) {
    if (test()) return;
    if (polls > 20000) {
      const auto now = std::chrono::steady_clock::now();
      if (now > deadline)
        abort(fmt::format("{} did not complete within {} s: another rank has stopped or died (set QFLOW_DIST_TIMEOUT to "
                          "wait longer)", impl_->what, collective_timeout().count()));
      std::this_thread::sleep_for(std::chrono::microseconds(polls > 100000 ? 1000 : 50));
    }
  }
}

// ---- ProcessGroup -----------------------------------------------------------------------------------

struct ProcessGroup::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // null for a world of one
  // Collectives of device tensors (Note [Collectives on a device]): one communicator per
  // device, made at the first collective on it.
  std::map<std::pair<int, int>, std::unique_ptr<DeviceCommunicator>> device_comms;  // by (type, index)
};

DeviceCommunicator& ProcessGroup::device_communicator(Device device, const std::string& what) {
  auto& comm = impl_->device_comms[{static_cast<int>(device.type()), device.index()}];
  if (comm) return *comm;
  DeviceRuntime& runtime = device_runtime(device);
  // Rank 0's id reaches every rank over MPI: [ok, length (8 bytes), id]. A rank 0 that cannot
  // make one still broadcasts (ok = 0) so that no rank waits for it: every rank then fails alike.
  std::string id, error;
  if (rank_ == 0) {
    try {
      id = runtime.new_communicator_id();
    } catch (const Error& e) {
      error = e.message();
    }
  }
  constexpr int64_t kMaxId = 4096;
  QFLOW_CHECK(static_cast<int64_t>(id.size()) <= kMaxId, "{}: a communicator id of {} bytes", what, id.size());
  Tensor packed = zeros({1 + 8 + kMaxId}, DType::UInt8);
  uint8_t* bytes = packed.data_ptr<uint8_t>();
  const int64_t length = static_cast<int64_t>(id.size());
  bytes[0] = error.empty() ? 1 : 0;
  std::memcpy(bytes + 1, &length, sizeof length);
  std::memcpy(bytes + 9, id.data(), id.size());
  broadcast(packed, 0, what + ": the device communicator's id");
  QFLOW_CHECK(bytes[0] == 1, "{}: rank 0 could not make a communicator for {}{}", what, device,
              error.empty() ? std::string() : ": " + error);
  int64_t received = 0;
  std::memcpy(&received, bytes + 1, sizeof received);
  QFLOW_CHECK(received > 0 && received <= kMaxId, "{}: a communicator id of {} bytes from rank 0", what, received);
  id.assign(reinterpret_cast<const char*>(bytes + 9), static_cast<size_t>(received));
  comm = runtime.communicator(device, rank_, size_, id);
  return *comm;
}

ProcessGroup::ProcessGroup() = default;
ProcessGroup::ProcessGroup(ProcessGroup&&) noexcept = default;
ProcessGroup& ProcessGroup::operator=(ProcessGroup&&) noexcept = default;
ProcessGroup::~ProcessGroup() = default;  // duplicates live until MPI_Finalize frees them

ProcessGroup& ProcessGroup::world() {
  static ProcessGroup* world = [] {
    auto* g = new ProcessGroup();  // never destroyed: MPI_Finalize runs at exit
    g->impl_ = std::make_unique<Impl>();
    if (!launched_by_mpi()) return g;
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      // Only the thread that calls into qflow's collectives uses MPI (data-loader workers and
      // OpenMP threads never do).
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        std::fprintf(stderr, "qflow: MPI_Init_thread failed under mpirun\n");
        std::_Exit(1);
      }
      std::atexit(finalize_at_exit);
    }
    g->impl_->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &g->size_);
    return g;
  }();
  return *world;
}

int local_rank() {
  ProcessGroup& world = ProcessGroup::world();  // starts MPI under mpirun
  if (world.size() == 1) return 0;
  static const int rank = [] {
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type (the processes of this machine)");
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
  }();
  return rank;
}

ProcessGroup ProcessGroup::duplicate() const {
  ProcessGroup g;
  g.impl_ = std::make_unique<Impl>();
  g.rank_ = rank_, g.size_ = size_;
  if (impl_->comm != MPI_COMM_NULL) check_mpi(MPI_Comm_dup(impl_->comm, &g.impl_->comm), "MPI_Comm_dup");
  return g;
}

Work ProcessGroup::all_reduce_async(Tensor t, ReduceOp op, std::string what) {
  check_contiguous(t, what);
  Work w;
  if (impl_->comm == MPI_COMM_NULL) return w;  // a world of one: the sum is the tensor
  if (!t.device().is_cpu()) {  // queued on the device's stream: done as far as the host knows
    device_communicator(t.device(), what).all_reduce(t, collective_op(op));
    return w;
  }
  w.impl_ = std::make_unique<Work::Impl>();
  w.impl_->what = std::move(what);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype(), w.impl_->what),
                           mpi_op(op, t.dtype(), w.impl_->what), impl_->comm, &w.impl_->request),
            w.impl_->what);
  w.impl_->keep = std::move(t);
  return w;
}

void ProcessGroup::all_reduce(Tensor& t, ReduceOp op, const std::string& what) { all_reduce_async(t, op, what).wait(); }

void ProcessGroup::broadcast(Tensor& t, int root, const std::string& what) {
  check_contiguous(t, what);
  QFLOW_CHECK(root >= 0 && root < size_, "{}: root {} is not a rank of a world of {}", what, root, size_);
  if (impl_->comm == MPI_COMM_NULL) return;
  if (!t.device().is_cpu()) {
    device_communicator(t.device(), what).broadcast(t, root);
    return;
  }
  Work w;
  w.impl_ = std::make_unique<Work::Impl>();
  w.impl_->what = what;
  check_mpi(MPI_Ibcast(t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype(), what), root, impl_->comm,
                       &w.impl_->request),
            what);
  w.impl_->keep = t;
  w.wait();
}

double ProcessGroup::sum(double value, const std::string& what) {
  Tensor t = scalar_tensor(value, DType::Float64);
  all_reduce(t, ReduceOp::Sum, what);
  return t.item<double>();
}

int64_t ProcessGroup::sum(int64_t value, const std::string& what) {
  Tensor t = scalar_tensor(value, DType::Int64);
  all_reduce(t, ReduceOp::Sum, what);
  return t.item<int64_t>();
}

void ProcessGroup::barrier(const std::string& what) {
  if (impl_->comm == MPI_COMM_NULL) return;
  Work w;
  w.impl_ = std::make_unique<Work::Impl>();
  w.impl_->what = what;
  check_mpi(MPI_Ibarrier(impl_->comm, &w.impl_->request), what);
  w.wait();
}

std::string ProcessGroup::describe() const {
  if (size_ == 1 && impl_->comm == MPI_COMM_NULL) return "single process";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("rank {} of {} on {}", rank_, size_, host);
}

}  // namespace qflow::distributed
