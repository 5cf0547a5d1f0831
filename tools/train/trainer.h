#pragma once
// One qflow-train run: data, model, SGD with a schedule, per-epoch evaluation, checkpoints
// (last = full training state, best = plain weights), logs and curves.
#include <atomic>
#include <memory>
#include <optional>

#include "../common/data_setup.h"
#include "predictions.h"
#include "qflow/qflow.h"
#include "run_log.h"
#include "train_options.h"
#include "train_step.h"

namespace qflow::tools {

/// Set by the SIGINT handler; the trainer saves and stops at the next batch boundary.
std::atomic<bool>& stop_requested();

struct EvalResult {
  double loss = 0, accuracy = 0;  // accuracy in %
  int64_t samples = 0;
};

/// Mean cross-entropy and top-1 accuracy of `model` (in eval mode) over `loader`, each batch
/// moved to the model's device (Module::device()); with a
/// `group`, summed over its ranks, each of which evaluates its shard (every rank must call).
/// With `predictions`, also records every image's output there.
EvalResult evaluate(nn::Module& model, data::DataLoader& loader, distributed::ProcessGroup* group = nullptr,
                    PredictionRecorder* predictions = nullptr);

// Note [qflow-train under mpirun]
// `mpirun -np N qflow-train ...` trains data-parallel: every process builds the same model
// (same seed; DistributedDataParallel also broadcasts rank 0's weights), loads its shard of
// each epoch (Note [Sharded epochs]) with --batch-size images per step, and averages
// gradients (Note [Gradient buckets]); the global batch is N × --batch-size. Rank 0 alone
// prints, writes the checkpoints, logs and curves (and --predictions, gathered from every
// rank's shard: Note [Gathered predictions]) and, after training, builds and reports the
// deploy/PTQ models; the others print nothing and wait for it at exit. What rank 0 saves is
// what every rank holds: the parameters are bitwise identical everywhere, the buffers are
// broadcast from rank 0 before every step and before evaluation, and the epoch's loss and
// accuracy sums are added over the ranks before they are recorded. Evaluation is sharded
// (no padding) and its sums added. Decisions that must be the same everywhere are made
// collectively: a Ctrl-C seen by any rank stops all of them after the same step. Every rank
// reads the checkpoint it resumes from (the directory must be shared between machines); the
// checkpoint records the world size and global batch, and a run may resume with another N —
// at an epoch boundary always, within an epoch when the images already trained on are a
// whole number of the new global batches. A rank that fails prints its error and aborts the
// job (distributed::abort), so the others never wait for it.

// Note [qflow-train under mpirun on GPUs]
// `mpirun -np N qflow-train --device cuda ...` trains data-parallel on N GPUs: each process
// takes the GPU of its local rank on its machine (distributed::local_rank), and what the CPU
// job sends over MPI — the gradient buckets during backward, the BatchNorm buffers rank 0
// broadcasts, SyncBatchNorm's and the observers' statistics — stays on the GPUs and goes
// through NCCL, queued on each GPU's stream (Note [Collectives on a device]); the host's
// figures (loss sums, counts) still go over MPI. The steps run eagerly (no CUDA graphs: the
// buckets are launched from autograd hooks as gradients arrive).

// Note [qflow-train --device]
// `--device cuda` trains and evaluates the float model on the GPU: the model is built, loaded
// (--weights) and resumed (--resume) on the CPU, then moved with its optimizer (Module::to,
// Optimizer::to). The training set goes to the GPU once, as uint8, and each batch is cropped,
// flipped and normalised there (data::DeviceDataLoader, Note [Data on the device]) when
// --data-on-device allows: auto (the default) does when the device is not the CPU, the transform
// is one the device runs and the set takes at most 2 GiB; on insists (an error says why it
// cannot; with --device cpu it runs the same loader on the CPU); off keeps the CPU loader. Both
// loaders give the same batches bit for bit, so the choice changes the speed, not the run; one
// line at start says which is used. Otherwise (and for the test set) each batch, loaded and
// augmented on the CPU in pinned memory, is moved before the step.
// The host reads back only what the CPU path reads (the loss and the correct count, with
// .item()), so a step queues its work on the device and waits once; full batches replay the
// step as CUDA graphs (Note [qflow-train --cuda-graphs]). Checkpoints are written
// from the CPU (nn::save copies device tensors back), so a run saved on the GPU resumes on
// the CPU and back. --qat and --qat-from train the QAT model on the device as well (its
// observers and quantization parameters stay there, Note [Observers stay on their device]);
// the report at the end (report_quant) brings the model back to the CPU first, where the
// deploy pass, the PTQ calibration (--ptq) and the integer model run: the deploy model is the
// same wherever the QAT model trained. --sensitivity and --mixed-precision run their passes
// on the CPU and calibrate and evaluate each PTQ model on the device (Note [qflow-train
// --sensitivity]). Data-parallel runs under mpirun stay on the CPU and refuse --device cuda,
// naming the flag; on a machine without a GPU (or a build without the CUDA backend) the run
// stops at start with the runtime's reason.

class Trainer {
 public:
  explicit Trainer(TrainOptions options);
  /// Runs the whole job; returns the process exit status (130 after Ctrl-C).
  int run();

 private:
  void build();
  /// --qat/--ptq: traces the float model and, with --qat, makes model_ the QAT GraphModule
  /// (trainer_quant.cpp; see Note [qflow-train quantization]).
  void setup_quant();
  /// After training or --eval-only: the deploy/PTQ models and the results table; `last` is
  /// model_'s latest test result when there is one.
  void report_quant(std::optional<EvalResult> last);
  /// The checkpoint metadata entry naming the run's quantization ("none" for float runs).
  std::string quant_tag() const;
  /// The checkpoint metadata entry "qconfig_mapping": the QAT mapping's canonical JSON ("" for
  /// runs without --qat); --resume refuses a checkpoint whose entry differs.
  std::string qconfig_mapping_tag() const;
  /// The training set's loader: on the device or the CPU per --data-on-device (Note [qflow-train --device]).
  std::unique_ptr<data::BatchLoader> make_train_loader() const;
  /// SGD over the model's parameters; learned quantization scales in a group without weight decay.
  std::unique_ptr<nn::optim::SGD> make_optimizer();
  /// Names the test images evaluate() uses (data set, location, count): best.safetensors
  /// records its accuracy under this tag (Note [Recorded test accuracy]).
  std::string test_set_tag() const;
  int evaluate_only();
  /// --sensitivity / --mixed-precision instead of training (sensitivity_run.cpp).
  int analyse_sensitivity();
  /// The float model's test accuracy (%): recorded in `weights` for these test images, else
  /// measured; printed either way.
  double float_accuracy(const std::string& weights);
  /// evaluate() over the test set, writing --predictions when `final` and the flag is given.
  EvalResult evaluate_test(bool final);
  /// Trains epoch `epoch` from batch `skip`; returns false when stopped by Ctrl-C.
  bool train_epoch(int64_t epoch, int64_t skip);
  /// Saves last.safetensors; a failure (full disk) throws naming the step, the file, the
  /// bytes and the reason, and leaves the previous file intact.
  void save_last(int64_t epoch, int64_t step) const;
  void save_last_unchecked(int64_t epoch, int64_t step) const;
  /// --device: moves the model (and the traced step model sharing its tensors) and the
  /// optimizer's buffers there, after they were built, loaded or resumed on the CPU
  /// (Note [qflow-train --device]).
  void move_to_device();
  /// Runs `write` on rank 0 only (the one process that writes files).
  bool writes_files() const { return world_.is_root(); }
  /// Images per optimizer step over all ranks.
  int64_t global_batch() const { return o_.batch_size * world_.size(); }
  /// The batch of this run's epoch a checkpoint saved after `step` batches of `saved_global_batch` continues at.
  int64_t resume_step(int64_t step, int64_t saved_global_batch) const;
  /// True on every rank when any rank saw Ctrl-C (collective under mpirun).
  bool stop_agreed();
  /// Logs step `step`'s batch loss and accuracy over the global batch (collective under mpirun).
  void record_step(int64_t epoch, int64_t step, double loss, int64_t correct, int64_t images);

  TrainOptions o_;
  Device device_;  // --device
  distributed::ProcessGroup& world_ = distributed::ProcessGroup::world();
  // Averages gradients over the ranks and keeps the replicas identical (a world of one: inert).
  std::shared_ptr<distributed::DistributedDataParallel> ddp_;
  DataSetup data_;
  nn::ModulePtr model_;  // the model trained: the zoo model, or its QAT GraphModule with --qat
  // What a training step runs: for float training model_ traced and fused (fx::fuse_activations,
  // sharing model_'s tensors); with --qat model_, fused in place; with --no-fuse or
  // --detect-anomaly model_ as written.
  nn::ModulePtr step_model_;
  // --qat/--ptq: the float zoo model, its trace, the example input of the passes, and the float
  // model's test accuracy when QAT starts from float weights.
  nn::ModulePtr float_model_;
  std::shared_ptr<fx::GraphModule> float_gm_;
  Tensor example_;
  std::optional<double> float_acc_;
  // The training batches: a DataLoader, or with --data-on-device a DeviceDataLoader.
  std::unique_ptr<data::BatchLoader> train_loader_;
  std::unique_ptr<data::DataLoader> test_loader_;
  // The whole test set for rank 0's reports under mpirun (test_loader_ holds a shard).
  std::unique_ptr<data::DataLoader> report_loader_;
  data::DataLoader& report_loader();
  std::unique_ptr<nn::optim::SGD> optimizer_;
  std::unique_ptr<TrainStep> step_;  // one optimizer step, eager or as CUDA graphs
  std::shared_ptr<nn::optim::LRScheduler> scheduler_;
  // Running sums of the epoch in progress (kept in checkpoints so a resumed epoch reports
  // the same figures as an uninterrupted one).
  double loss_sum_ = 0, best_acc_ = 0;
  int64_t correct_ = 0, seen_ = 0;
  std::optional<RunLog> log_;  // rank 0's logs and curves
};

}  // namespace qflow::tools
