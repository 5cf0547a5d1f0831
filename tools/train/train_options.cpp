#include "train_options.h"

namespace qflow::tools {

void add_train_options(CLI::App& app, TrainOptions& o) {
  app.add_option("--model", o.model, "Model from the zoo: resnet18, resnet34, resnet50, mobilenet_v2, alexnet, lenet5")
      ->capture_default_str();
  add_dataset_options(app, o.dataset, o.data);
  app.add_option("--epochs", o.epochs, "Training epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
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
  app.add_option("--workers", o.workers, "Data loading threads")->capture_default_str();
  app.add_flag("--augment,!--no-augment", o.augment, "Random crop + flip on the training set")->capture_default_str();
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "Where last.safetensors, best.safetensors, log.csv, log.jsonl and curves.png go")
      ->capture_default_str();
  app.add_flag("--resume", o.resume, "Continue from CHECKPOINT_DIR/last.safetensors (bit-identical)");
  app.add_flag("--eval-only", o.eval_only, "Only evaluate (with --weights, or CHECKPOINT_DIR/best.safetensors)");
  app.add_option("--subset", o.subset, "Train on the first N training samples only (quick runs)");
  app.add_option("--test-subset", o.test_subset, "Evaluate on the first N test samples only");
  app.add_option("--weights", o.weights, "Start from a plain state_dict (.safetensors), e.g. exported from PyTorch")
      ->check(CLI::ExistingFile);
  app.add_option("--stop-after", o.stop_after,
                 "Stop after this many epochs with a resumable checkpoint (split a run across sessions)");
}

}  // namespace qflow::tools
