#pragma once
// One optimizer step of qflow-train, eager or replayed as CUDA graphs. See Note [qflow-train --cuda-graphs].
#include <memory>
#include <string>

#include "qflow/nn/step_graph.h"
#include "qflow/qflow.h"

namespace qflow::tools {

// Note [qflow-train --cuda-graphs]
// On a GPU each training step of the full batch size runs as two CUDA graphs (Note [Step
// graphs]): forward, loss, backward and the correct count; then the optimizer step and the sum
// of the parameters. Between them the host reads the loss, so a non-finite loss still stops
// the run before any weight is updated, and after the second it reads the sum, so a step that
// made a weight non-finite still stops it before anything is saved (Note [Non-finite
// training]): the same guarantees as the eager step, two reads per step. The graphs are
// captured at the first full batch of each epoch (the learning rate, baked into the optimizer's
// kernel, changes between epochs), after one eager warm-up step at the start; a smaller last
// batch runs eagerly. --cuda-graphs auto (the default) falls back to eager steps, saying why,
// when a step cannot be captured (dropout draws random numbers: AlexNet); on makes that an
// error; off keeps every step eager. Data-parallel runs and --detect-anomaly are eager.
enum class GraphMode { Off, Auto, On };
GraphMode parse_graph_mode(const std::string& text);

/// The correct predictions of `logits` for `labels`, read to the host.
int64_t count_correct(const Tensor& logits, const Tensor& labels);

/// Where a step leaves its figures.
struct StepResult {
  double loss = 0;
  int64_t correct = 0;
};

class TrainStep {
 public:
  /// `step_model` computes the step (the traced, fused model), `model` owns the parameters it
  /// checks; `checkpoint_dir` names the saved state in non-finite errors. Graphs are used
  /// when `mode` allows and `device` is a GPU, for batches of `batch_size` images.
  TrainStep(nn::Module& step_model, nn::Module& model, nn::optim::Optimizer& optimizer,
            distributed::DistributedDataParallel& ddp, std::string checkpoint_dir, GraphMode mode, Device device,
            int64_t batch_size);

  /// One optimizer step on a batch already on the model's device.
  StepResult operator()(const Tensor& images, const Tensor& labels);
  /// Drops the graphs: the next full batch captures them again (the lr may have changed).
  void new_epoch();

 private:
  StepResult eager(const Tensor& images, const Tensor& labels);
  StepResult graphed(const Tensor& images, const Tensor& labels);
  // --cuda-graphs auto after a failed capture: eager from now on, saying why.
  void give_up_graphs(const Error& why);

  nn::Module& step_model_;
  nn::Module& model_;
  nn::optim::Optimizer& optimizer_;
  distributed::DistributedDataParallel& ddp_;
  std::string checkpoint_dir_;
  GraphMode mode_;
  int64_t batch_size_;
  std::unique_ptr<nn::StepGraph> forward_, update_;  // null: eager steps
};

}  // namespace qflow::tools
