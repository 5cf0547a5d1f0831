// The CUDA backend's device communicator: NCCL, loaded at run time (Note [Collectives on a
// device], Note [NCCL at run time]).
#include "communicator.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "context.h"
#include "cuda_check.h"
#include "qflow/core/error.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define QFLOW_HAVE_NCCL_HEADER 1
#endif

namespace qflow::cuda {

// Note [NCCL at run time]
// Only data-parallel jobs on several GPUs need NCCL, and a machine that trains on one GPU may not
// have it: qflow opens libnccl.so.2 with dlopen when the first communicator is asked for,
// instead of linking it, so every qflow binary starts without it (as they start without a GPU,
// Note [CUDA backend]). The functions are the ones nccl.h declares, looked up by name. Without
// the library the request fails saying what to install; LD_LIBRARY_PATH finds one outside the
// system's paths (PyTorch's wheels ship one in nvidia/nccl/lib).
#ifdef QFLOW_HAVE_NCCL_HEADER
namespace {

struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string missing;  // why NCCL cannot be used ("" when it can)
};

const Nccl& nccl() {
  static const Nccl n = [] {
    Nccl r;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      r.missing = fmt::format("libnccl.so.2 could not be opened ({}): data-parallel training on GPUs needs NCCL; "
                              "install it (Debian/Ubuntu: libnccl2) or add its directory to LD_LIBRARY_PATH",
                              dlerror());
      return r;
    }
    auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && r.missing.empty()) r.missing = fmt::format("libnccl.so.2 has no {}", name);
    };
    find(r.get_unique_id, "ncclGetUniqueId");
    find(r.comm_init_rank, "ncclCommInitRank");
    find(r.comm_destroy, "ncclCommDestroy");
    find(r.all_reduce, "ncclAllReduce");
    find(r.broadcast, "ncclBroadcast");
    find(r.error_string, "ncclGetErrorString");
    return r;
  }();
  return n;
}

const Nccl& usable_nccl() {
  const Nccl& n = nccl();
  QFLOW_CHECK(n.missing.empty(), "NCCL: {}", n.missing);
  return n;
}

void check(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  QFLOW_FAIL("{}: NCCL error {} ({})", what, static_cast<int>(status), nccl().error_string(status));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Bool: return ncclUint8;  // one byte of 0 or 1: max = any, min = all
  }
  QFLOW_FAIL("NCCL: unsupported dtype {}", t);
}

ncclRedOp_t nccl_op(CollectiveOp op, DType t) {
  QFLOW_CHECK(!(t == DType::Bool && op == CollectiveOp::Sum), "NCCL all_reduce: cannot sum bool tensors");
  switch (op) {
    case CollectiveOp::Sum: return ncclSum;
    case CollectiveOp::Min: return ncclMin;
    case CollectiveOp::Max: return ncclMax;
  }
  QFLOW_FAIL("NCCL all_reduce: unknown op");
}

class NcclCommunicator final : public DeviceCommunicator {
 public:
  NcclCommunicator(Device device, ncclComm_t comm) : device_(device), comm_(comm) {}
  ~NcclCommunicator() override {
    DeviceGuard guard(device_);
    nccl().comm_destroy(comm_);  // a destructor: a failure here has no one to tell
  }

  void all_reduce(Tensor& t, CollectiveOp op) override {
    check_tensor(t, "NCCL all_reduce");
    DeviceGuard guard(device_);
    check(nccl().all_reduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                            nccl_op(op, t.dtype()), comm_, stream(device_)),
          "NCCL all_reduce");
    t.impl()->storage()->bump_version();
  }

  void broadcast(Tensor& t, int root) override {
    check_tensor(t, "NCCL broadcast");
    DeviceGuard guard(device_);
    check(nccl().broadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), root, comm_,
                           stream(device_)),
          "NCCL broadcast");
    t.impl()->storage()->bump_version();
  }

 private:
  void check_tensor(const Tensor& t, const char* what) const {
    QFLOW_CHECK(t.defined() && t.is_contiguous(), "{}: expected a defined, contiguous tensor", what);
    QFLOW_CHECK(t.device() == device_, "{}: the tensor is on {}, the communicator on {}", what, t.device(), device_);
  }

  Device device_;
  ncclComm_t comm_;
};

}  // namespace

std::string new_communicator_id() {
  const Nccl& n = usable_nccl();
  ncclUniqueId id;
  check(n.get_unique_id(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof id.internal);
}

std::unique_ptr<DeviceCommunicator> communicator(Device device, int rank, int size, const std::string& id) {
  const Nccl& n = usable_nccl();
  ncclUniqueId unique;
  QFLOW_CHECK(id.size() == sizeof unique.internal, "NCCL: a communicator id has {} bytes, got {}",
              sizeof unique.internal, id.size());
  std::memcpy(unique.internal, id.data(), id.size());
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  check(n.comm_init_rank(&comm, size, unique, rank),
        fmt::format("ncclCommInitRank (rank {} of {} on {})", rank, size, device).c_str());
  return std::make_unique<NcclCommunicator>(device, comm);
}

#else  // no nccl.h where this qflow was built

std::string new_communicator_id() {
  QFLOW_FAIL("NCCL: this qflow was built without nccl.h, so data-parallel training on GPUs is unavailable; rebuild it "
             "where NCCL's header is installed (it comes with the CUDA toolkit's NCCL package)");
}

std::unique_ptr<DeviceCommunicator> communicator(Device, int, int, const std::string&) {
  (void)new_communicator_id();  // throws the reason
  return nullptr;
}

#endif

}  // namespace qflow::cuda
