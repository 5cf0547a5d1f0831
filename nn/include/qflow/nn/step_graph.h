#pragma once
// A function of device tensors run as one captured graph after warm-up. See Note [Step graphs].
#include <functional>
#include <memory>
#include <vector>

#include "qflow/core/device_graph.h"
#include "qflow/core/tensor.h"

namespace qflow::nn {

// Note [Step graphs]
// StepGraph turns a training (or any) step into a CUDA graph the way a user would by hand with
// capture_graph (Note [Captured device work]): the first `warmup` calls run the function
// eagerly (they fill cuDNN's plan cache, create optimizer state, make the lazy allocations);
// the next call allocates the graph's input tensors on the device, copies the inputs into
// them, captures the function applied to them, and replays it; every later call copies its
// inputs in and replays. The returned tensors are the graph's outputs, overwritten by the next
// call, as PyTorch's static outputs are. Only inputs of the captured shapes and dtypes can
// replay (matches()); a caller with another shape (the last, smaller batch) runs its step
// uncaptured. Host values the function reads at capture stay fixed (a learning rate): reset()
// after changing one, and the next call captures again. The module's parameters, buffers and
// optimizer state are updated in place, so eager and replayed steps can alternate.
class StepGraph {
 public:
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
  struct Options {
    int warmup = 1;  // eager calls before the capture
  };

  /// `device` must be able to capture graphs (a GPU); the CPU is refused with the reason.
  StepGraph(Device device, Function function, Options options);
  StepGraph(Device device, Function function) : StepGraph(device, std::move(function), Options{}) {}

  /// Runs the function on `inputs` (see the Note). Throws when a captured graph exists and
  /// the inputs' shapes or dtypes differ from the captured ones.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  /// Whether these inputs can replay the captured graph (true before the capture).
  bool matches(const std::vector<Tensor>& inputs) const;
  /// Drops the graph: the next call captures again (no new warm-up).
  void reset();
  /// Whether the next call captures (the warm-up is over and there is no graph).
  bool captures_next() const { return !graph_ && calls_ >= options_.warmup; }
  /// The captured graph, null before the capture.
  const DeviceGraph* graph() const { return graph_.get(); }
  /// Replays so far (of any graph this StepGraph captured).
  int64_t replays() const { return replays_; }

 private:
  Device device_;
  Function function_;
  Options options_;
  int calls_ = 0;
  int64_t replays_ = 0;
  std::vector<Tensor> inputs_;   // the graph's input tensors
  std::vector<Tensor> outputs_;  // the graph's output tensors
  std::unique_ptr<DeviceGraph> graph_;
};

}  // namespace qflow::nn
