// CUDA graphs: capture and replay of the work queued on a device's stream
// (Note [Captured device work]).
#include "graph.h"

#include "caching_allocator.h"
#include "context.h"
#include "cuda_check.h"
#include "pinned_allocator.h"
#include "qflow/core/error.h"
#include "qflow/core/storage.h"

namespace qflow::cuda {
namespace {

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(Device device, uint64_t pool, cudaGraph_t graph, cudaGraphExec_t exec,
            std::vector<std::weak_ptr<Storage>> written, std::vector<std::pair<void*, size_t>> pinned)
      : device_(device), pool_(pool), graph_(graph), exec_(exec), written_(std::move(written)),
        pinned_(std::move(pinned)) {}

  ~CudaGraph() override {
    // Replays still queued run before any work that reuses the memory (one stream), so the
    // blocks can go back at once; the graph objects outlive their launches on the driver's side.
    DeviceGuard guard(device_);
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    CachingAllocator::instance().release_pool(device_, pool_);
    for (const auto& [p, n] : pinned_) PinnedAllocator::instance().free(p, n);
  }

  void replay() override {
    DeviceGuard guard(device_);
    QFLOW_CUDA_CHECK(cudaGraphLaunch(exec_, stream(device_)), "CUDA graph replay");
    detail::bump_versions(written_);  // Note [Versions of captured writes]
  }

  Device device() const override { return device_; }

  size_t nodes() const override {
    size_t n = 0;
    QFLOW_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n), "cudaGraphGetNodes");
    return n;
  }

 private:
  Device device_;
  uint64_t pool_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::vector<std::weak_ptr<Storage>> written_;
  std::vector<std::pair<void*, size_t>> pinned_;  // staging blocks the recorded copies read
};

// Undoes the routing of memory and version bumps at the end of a capture, however it ends.
class CaptureScope {
 public:
  explicit CaptureScope(Device device) : device_(device) {
    pool_ = CachingAllocator::instance().begin_capture(device);
    PinnedAllocator::instance().begin_holding();
    previous_ = detail::record_version_bumps(&written_);
  }
  ~CaptureScope() { finish(); }

  // Stops routing; what the capture held now belongs to the graph (or, on failure, is released).
  void finish() {
    if (done_) return;
    done_ = true;
    detail::record_version_bumps(previous_);
    CachingAllocator::instance().end_capture(device_);
    pinned_ = PinnedAllocator::instance().end_holding();
  }
  // After a failed capture: nothing will replay, so the memory goes back to the caches.
  void release() {
    finish();
    CachingAllocator::instance().release_pool(device_, pool_);
    for (const auto& [p, n] : pinned_) PinnedAllocator::instance().free(p, n);
    pinned_.clear();
  }

  uint64_t pool() const { return pool_; }
  std::vector<std::weak_ptr<Storage>>& written() { return written_; }
  std::vector<std::pair<void*, size_t>>& pinned() { return pinned_; }

 private:
  Device device_;
  uint64_t pool_ = 0;
  bool done_ = false;
  std::vector<std::weak_ptr<Storage>> written_;
  std::vector<std::weak_ptr<Storage>>* previous_ = nullptr;
  std::vector<std::pair<void*, size_t>> pinned_;
};

// Ends the capture on `s`, discarding what it recorded (after `work` failed).
void abandon_capture(cudaStream_t s) {
  cudaGraph_t partial = nullptr;
  cudaStreamEndCapture(s, &partial);  // an invalidated capture reports an error: ignored
  if (partial != nullptr) cudaGraphDestroy(partial);
  cudaGetLastError();  // the capture's sticky status is not the caller's error
}

}  // namespace

std::unique_ptr<DeviceGraph> capture(Device device, const std::function<void()>& work) {
  DeviceGuard guard(device);
  const cudaStream_t s = stream(device);
  QFLOW_CHECK(!capturing(device), "capture_graph: {} is already capturing a graph; captures do not nest", device);
  // Work queued before the capture is not part of it; the blocks the capture's pool hands out
  // are new or were freed in stream order, so that work never touches them.
  CaptureScope scope(device);
  // Relaxed: the capture's own allocations may call cudaMalloc (a pool miss), which the
  // stricter modes forbid on the capturing thread; what must not happen inside a capture
  // (reads to the host, synchronisation, random draws) is refused by qflow itself.
  QFLOW_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  try {
    work();
  } catch (const Error& e) {
    abandon_capture(s);
    scope.release();
    QFLOW_FAIL("capture_graph on {}: the captured function failed, nothing was recorded: {}", device, e.message());
  } catch (...) {
    abandon_capture(s);
    scope.release();
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (ended != cudaSuccess) {
    cudaGetLastError();
    if (graph != nullptr) cudaGraphDestroy(graph);
    scope.release();
    QFLOW_FAIL("capture_graph on {}: the capture was invalidated ({}: {}); something in the function synchronised "
               "with the device or used another stream (Note [Captured device work])",
               device, cudaGetErrorName(ended), cudaGetErrorString(ended));
  }
  scope.finish();
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    cudaGetLastError();
    cudaGraphDestroy(graph);
    scope.release();
    QFLOW_FAIL("capture_graph on {}: cudaGraphInstantiate failed ({}: {})", device, cudaGetErrorName(made),
               cudaGetErrorString(made));
  }
  // Uploading now keeps the one-time setup out of the first replay's time.
  QFLOW_CUDA_CHECK(cudaGraphUpload(exec, s), "cudaGraphUpload");
  detail::deduplicate(scope.written());
  return std::make_unique<CudaGraph>(device, scope.pool(), graph, exec, std::move(scope.written()),
                                     std::move(scope.pinned()));
}

}  // namespace qflow::cuda
