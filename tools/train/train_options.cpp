#include "train_options.h"

#include "../common/cli_checks.h"

namespace qflow::tools {

void add_train_options(CLI::App& app, TrainOptions& o) {
  add_model_flag(app, o.model);
  add_dataset_flags(app, o.dataset, o.data);
  app.add_option("--epochs", o.epochs, "Training epochs")->check(kPositive)->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Batch size")->check(kPositive)->capture_default_str();
  app.add_option("--lr", o.lr, "Initial learning rate")->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "Weight decay (L2)")->capture_default_str();
  app.add_option("--schedule", o.schedule, "Learning-rate schedule: cosine | multistep | constant")
      ->check(CLI::IsMember({"cosine", "multistep", "constant"}))
      ->capture_default_str();
  app.add_option("--milestones", o.milestones, "Epochs where multistep multiplies the lr by --gamma (default 50%,75%)");
  app.add_option("--gamma", o.gamma, "Multistep decay factor")->capture_default_str();
  app.add_option("--warmup-epochs", o.warmup_epochs, "Linear warm-up epochs before the schedule")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed for initialisation, shuffling, augmentation and dropout")->capture_default_str();
  app.add_option("--threads", o.threads, "Compute threads (0 = all cores)")->capture_default_str();
  add_device_flag(app, o.device,
                  "Where training, evaluation and the --sensitivity analysis run: cpu | cuda | cuda:N (see "
                  "--data-on-device for where the training set is augmented; checkpoints are the same whatever the "
                  "device: a run resumes on another). The deploy pass, --ptq and the integer models of the final "
                  "report run on the CPU");
  app.add_option("--workers", o.workers, "Data loading threads")->capture_default_str();
  app.add_option("--data-on-device", o.data_on_device,
                 "Keep the training set on --device as uint8 and crop, flip and normalise it there (no host copy per "
                 "step; the same batches bit for bit): auto = when --device is not cpu, the set takes at most 2 GiB "
                 "and its transform runs there; on = insist (error if it cannot); off = load and augment on the CPU")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--cuda-graphs", o.cuda_graphs,
                 "On a GPU, capture each epoch's training step of --batch-size images as CUDA graphs and replay them "
                 "(the same results; far less host time per step): auto = unless the step cannot be captured "
                 "(dropout), then eager steps, saying why; on = insist (error if it cannot); off = eager steps")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  // CLI11 lists this as "--augment,--no-augment{false}" (the value --no-augment sets), which reads
  // like an "off" default: the description says it.
  app.add_flag("--augment,!--no-augment", o.augment, "Random crop + flip on the training set (default: on)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "Where last.safetensors, best.safetensors, log.csv, log.jsonl, steps.csv and curves.png go")
      ->capture_default_str();
  app.add_flag("--resume", o.resume, "Continue from CHECKPOINT_DIR/last.safetensors (bit-identical)");
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "Also save last.safetensors every N optimizer steps, so a killed run loses at most N steps (0 = at "
                 "epoch ends only)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_flag("--detect-anomaly", o.detect_anomaly,
               "Check every op, module output, parameter and gradient for NaN/Inf and stop at the first, naming the "
               "step, module and op (slow: for debugging; runs the model unfused, as written)");
  app.add_flag("--no-fuse", o.no_fuse,
               "Train the model as written, without fusing its ReLUs (fx::fuse_activations: same results, a few % slower)");
  app.add_flag("--eval-only", o.eval_only,
               "Only evaluate (with --weights, or CHECKPOINT_DIR/best.safetensors); reads the test split alone "
               "(and the training split for --ptq's calibration)");
  app.add_option("--predictions", o.predictions,
                 "Write one CSV row per test image — index,label,predicted,prob_0,...: the class probabilities "
                 "(softmax) — of the --eval-only evaluation, or of the model after the last epoch");
  app.add_option("--subset", o.subset, "Train on the first N training samples only (quick runs)");
  app.add_option("--test-subset", o.test_subset, "Evaluate on the first N test samples only");
  app.add_option("--weights", o.weights, "Start from a plain state_dict (.safetensors), e.g. exported from PyTorch")
      ->check(CLI::ExistingFile);
  app.add_option("--stop-after", o.stop_after,
                 "Stop after this many epochs with a resumable checkpoint (split a run across sessions)");
  app.add_flag("--sync-bn", o.sync_bn,
               "Under mpirun: BatchNorm with the statistics of the global batch (SyncBatchNorm) instead of each "
               "process's share (float training only)");
  app.add_option("--bucket-mb", o.bucket_mb, "Under mpirun: gradient allreduce bucket size in MiB")
      ->check(kNonNegative)
      ->capture_default_str();
  add_quant_options(app, o);
}

void add_quant_options(CLI::App& app, TrainOptions& o) {
  app.add_flag("--qat", o.qat, "Quantization aware training: train the QAT model (BN folded into QConvBN), "
                                             "then evaluate it and its deploy model");
  app.add_option("--qat-from", o.qat_from, "Fine-tune this float checkpoint (best.safetensors or last.safetensors) with QAT")
      ->check(CLI::ExistingFile)
      ->excludes("--weights");
  app.add_flag("--ptq", o.ptq, "Also quantize the float model post-training (BN folded, calibrated) and evaluate it");
  add_quant_flags(app, o);
  // --momentum is SGD's, so the observers' momentum has its own name.
  app.add_option("--qat-momentum", o.qat_momentum, "Activation observers' moving-average momentum")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_option("--ste", o.ste, "Straight-through estimator: pure | clipped")
      ->check(CLI::IsMember({"pure", "clipped"}))
      ->capture_default_str();
  app.add_option("--bn-fold", o.bn_fold,
                 "How QConvBN folds BatchNorm in training: running (PyTorch's ConvBn2d: running statistics, "
                 "one conv) | batch (OneFlow: batch statistics, a second conv; about 1.8x the float step)")
      ->check(CLI::IsMember({"running", "batch"}))
      ->capture_default_str();
  app.add_option("--calib-batches", o.calib_batches, "Training batches that calibrate the PTQ model")
      ->check(kPositive)
      ->capture_default_str();
  app.add_flag("--sensitivity", o.sensitivity,
               "Instead of training: quantize one layer at a time (PTQ with the quantization flags, calibrated on "
               "--calib-batches), the rest float, and rank the layers by the test accuracy each loses (use "
               "--test-subset N); needs the float weights (--qat-from FILE); writes CHECKPOINT_DIR/sensitivity.csv");
  app.add_option("--mixed-precision", o.mixed_precision,
                 "With the sensitivity ranking, keep the fewest most sensitive layers at --high-bits so that the "
                 "whole PTQ model loses at most DROP points of test accuracy; writes the --qconfig file "
                 "CHECKPOINT_DIR/mixed_precision.json (implies --sensitivity)")
      ->check(kNonNegative);
  app.add_option("--high-bits", o.high_bits, "--mixed-precision: the weight bits of the layers kept at higher precision")
      ->check(CLI::Range(2, 16))
      ->capture_default_str();
}

quant::QConfig TrainOptions::training_qconfig() const {
  return {.momentum = qat_momentum, .ste = quant::parse_ste(ste), .bn_fold = quant::parse_bn_fold(bn_fold)};
}

quant::QConfig TrainOptions::qconfig() const { return QuantFlags::qconfig(training_qconfig()); }

quant::QConfigMapping TrainOptions::qconfig_mapping() const { return QuantFlags::qconfig_mapping(training_qconfig()); }

}  // namespace qflow::tools
