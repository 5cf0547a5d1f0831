#pragma once
// Everything qflow-train can be told; defaults follow the CIFAR recipe behind the published
// ResNet18 figures (SGD 0.1, momentum 0.9, weight decay 5e-4, cosine, batch 128, crop+flip).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../common/cli_flags.h"
#include "../common/data_setup.h"
#include "qflow/quant/qconfig.h"
#include "qflow/quant/qconfig_mapping.h"
#include "../common/qconfig_option.h"

namespace qflow::tools {

// The quantization flags every tool shares are the QuantFlags base (cli_flags.h).
struct TrainOptions : QuantFlags {
  std::string model = "resnet18";
  std::string dataset = "cifar10";  // cifar10 | fashion-mnist | mnist | folder
  std::string data;                 // directory (or CIFAR .tar.gz); empty = the dataset's default
  int64_t epochs = 30;
  int64_t batch_size = 128;
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  std::string schedule = "cosine";  // cosine | multistep | constant
  std::vector<int64_t> milestones;  // multistep; default: 50 % and 75 % of the epochs
  double gamma = 0.1;
  int64_t warmup_epochs = 0;
  uint64_t seed = 0;
  int threads = 0;  // 0 = all cores
  std::string device = "cpu";  // cpu | cuda | cuda:N: where float training and evaluation run
  int workers = 2;
  // auto | on | off: the training set resident on --device, augmented there (Note [qflow-train --device])
  std::string data_on_device = "auto";
  // auto | on | off: training steps replayed as CUDA graphs on a GPU (Note [qflow-train --cuda-graphs])
  std::string cuda_graphs = "auto";
  bool augment = true;
  std::string checkpoint_dir = "runs/train";
  bool resume = false;
  int64_t checkpoint_every = 0;  // also save last.safetensors every N optimizer steps (0 = epoch ends only)
  bool detect_anomaly = false;   // nn::DetectAnomaly around every training step
  bool no_fuse = false;          // train the model as written, without fx::fuse_activations
  bool eval_only = false;
  std::string predictions;  // --predictions FILE.csv: per-image outputs of the final evaluation
  int64_t subset = 0;       // train on the first N samples only (0 = all)
  int64_t test_subset = 0;  // evaluate on the first N test samples only (0 = all)
  std::string weights;      // start from a plain state_dict (.safetensors)
  int64_t stop_after = 0;   // stop (as after Ctrl-C) once this many epochs are done (0 = never)

  // Data-parallel training under mpirun (Note [qflow-train under mpirun] in trainer.h).
  bool sync_bn = false;     // distributed::convert_sync_batchnorm: BatchNorm over the global batch
  double bucket_mb = 25;    // DistributedDataParallel's gradient bucket size (MiB)

  // Quantization (see Note [qflow-train quantization] in quant_report.h).
  bool qat = false;          // train the quantization aware model (quant::quantization_aware_training)
  std::string qat_from;      // fine-tune this float checkpoint with QAT (implies qat)
  bool ptq = false;          // also quantize the float model post-training (calibrate + deploy)
  double qat_momentum = 0.95;        // activation observers' moving average
  std::string ste = "pure";          // pure | clipped
  std::string bn_fold = "running";   // running | batch (QConvBN in training)
  int64_t calib_batches = 16;        // PTQ calibration batches from the training set
  // Sensitivity analysis instead of training (Note [qflow-train --sensitivity] in sensitivity_run.cpp).
  bool sensitivity = false;              // rank the layers, each quantized alone (PTQ)
  std::optional<double> mixed_precision;  // the accuracy drop allowed: choose layers for --high-bits
  int64_t high_bits = 8;                 // the bits of the layers --mixed-precision raises

  /// --sensitivity or --mixed-precision.
  bool analyses_sensitivity() const { return sensitivity || mixed_precision.has_value(); }

  /// The QConfig the quantization flags describe (the shared ones and the training ones).
  quant::QConfig qconfig() const;
  /// The per-layer mapping of the flags and --qconfig (qconfig() everywhere without a file).
  quant::QConfigMapping qconfig_mapping() const;

  /// The fields of the QConfig only training sets (--qat-momentum, --ste, --bn-fold).
  quant::QConfig training_qconfig() const;

  /// The data part of the options. --eval-only reads the training split only for --ptq, whose
  /// calibration batches come from it.
  DataOptions data_options() const {
    return {.dataset = dataset, .data = data, .augment = augment, .subset = subset, .test_subset = test_subset,
            .load_train = !eval_only || ptq};
  }
};

/// Declares the flags on `app`, writing into `o`.
void add_train_options(CLI::App& app, TrainOptions& o);
/// The quantization flags (part of add_train_options).
void add_quant_options(CLI::App& app, TrainOptions& o);

}  // namespace qflow::tools
