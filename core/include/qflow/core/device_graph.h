#pragma once
// Device work recorded once and replayed: CUDA graphs behind a device-neutral interface.
// See Note [Captured device work].
#include <functional>
#include <memory>
#include <vector>

#include "qflow/core/device.h"

namespace qflow {

class Storage;

// Note [Captured device work]
// On a GPU qflow is bound by the host: a ResNet18 training step queues ~1,000 kernels at
// ~10 us of dispatch each, while the GPU needs a few ms for them (issue 33's profile). A CUDA
// graph records the kernels one run of a function queues and replays them all with one launch,
// so a replayed step costs the host microseconds. What replay means for the caller:
//  - Capture runs the function's host code once and queues nothing: its device work is recorded,
//    not done. Replay does that work again and again, with the same kernels, the same arguments
//    and the same addresses; host code in the function does not run again.
//  - So everything the function reads must be device memory at a fixed address: inputs are
//    copied into tensors allocated before capture, outputs are the tensors the capture made
//    (each replay overwrites them), and host values baked into kernel arguments (a learning
//    rate, a momentum) stay what they were at capture: change one, capture again.
//  - Memory the capture allocates comes from a pool of its own that nothing else uses while
//    the graph lives, and blocks it frees that existed before go back to the cache only when
//    the graph dies, since replays still touch them (Note [CUDA caching allocator]).
//  - Reading a value back to the host, synchronising, or drawing random numbers (dropout: the
//    draw's Philox offset would be fixed by capture) inside the function cannot be recorded:
//    capture fails with a qflow::Error that says so, and the device is usable as before.
//  - Replays bump the versions of the storages the capture wrote in place (Note [Versions of
//    captured writes]), so caches keyed by versions (the GPU's channels-last filters) see them.
// Capture is what torch.cuda.graph does; replay is CUDAGraph.replay().
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// Queues the recorded work on the device's stream (returns at once, like a kernel launch).
  virtual void replay() = 0;
  virtual Device device() const = 0;
  /// Kernels and copies the capture recorded.
  virtual size_t nodes() const = 0;
};

/// Records the device work `work` queues on `device` into a graph (see the Note). Throws
/// qflow::Error when the device cannot capture (the CPU, a build without CUDA) or when `work`
/// did something a graph cannot hold; `work`'s own exceptions pass through, the capture undone.
std::unique_ptr<DeviceGraph> capture_graph(Device device, const std::function<void()>& work);

// Note [Versions of captured writes]
// In-place writes bump their storage's version (Note [Version counter]), which autograd and the
// weight caches read. A replay writes the same storages again without running the host code
// that bumped them, so capture records every storage bumped while it ran and each replay bumps
// those that are still alive once more: an optimizer step that runs as a graph still makes the
// GPU's cached channels-last copy of a weight stale.
namespace detail {
/// Starts recording the storages bumped on this thread; returns the previous recorder.
std::vector<std::weak_ptr<Storage>>* record_version_bumps(std::vector<std::weak_ptr<Storage>>* into);
/// Bumps each storage of `storages` still alive, once (duplicates are bumped once).
void bump_versions(const std::vector<std::weak_ptr<Storage>>& storages);
/// Keeps one entry per storage (and drops expired ones).
void deduplicate(std::vector<std::weak_ptr<Storage>>& storages);
}  // namespace detail

}  // namespace qflow
