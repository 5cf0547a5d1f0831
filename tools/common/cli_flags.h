#pragma once
// The command-line flags several tools share, defined once: the data set, the zoo model and its
// input shape, and the quantization flags with --qconfig. Every tool declares them through
// these functions, so a flag means, defaults and is checked the same in qflow-train,
// qflow-export, qflow-graph and qflow-show-data.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "qflow/quant/qconfig.h"
#include "qflow/quant/qconfig_mapping.h"
#include "qconfig_option.h"

namespace qflow::tools {

/// --dataset (cifar10 | fashion-mnist | mnist | folder) and --data, for the tools that read a data set.
void add_dataset_flags(CLI::App& app, std::string& dataset, std::string& data);

/// A flag naming one of the data sets (qflow-export's --calibrate, qflow-graph's --compare).
CLI::Option* add_dataset_choice(CLI::App& app, const std::string& flag, std::string& dataset, const std::string& help);

/// --model: a zoo model, a wrong name refused with models::create's message ("unknown model
/// 'resnet19' (known: alexnet, ...)").
CLI::Option* add_model_flag(CLI::App& app, std::string& model);

/// The input and output sizes of a model built without a data set.
struct ModelShapeFlags {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t image_size = 32;
};

/// --num-classes, --in-channels and --image-size, each a positive number.
void add_model_shape_flags(CLI::App& app, ModelShapeFlags& shape);

/// --device cpu | cuda | cuda:N (default cpu), checked with Device::parse: a wrong value is
/// refused with its message ("unknown device 'gpu0': expected 'cpu', 'cuda' or 'cuda:<index>'").
/// Whether the machine has that device is the tool's to check (device_runtime throws saying why).
CLI::Option* add_device_flag(CLI::App& app, std::string& device, const std::string& help);

/// The grid the quantized layers use: --bits, --activation-bits, --scheme, --formula,
/// --per-channel, what sets the scales (--observer & co.), and --qconfig FILE.json refining
/// them per layer (Note [QConfig mapping]).
struct QuantFlags {
  int64_t bits = 8;
  /// Unset: the activations take --bits too; `--bits 4 --activation-bits 8` is W4A8 (Note
  /// [Weight and activation bits] in quant/qconfig.h).
  std::optional<int64_t> activation_bits;
  std::string scheme = "symmetric";  // symmetric | affine
  std::string formula = "google";    // google | cambricon
  bool per_channel = false;
  ObserverFlags observer;    // --observer, --percentile, --scale-init, --learn-zero-point
  std::string qconfig_file;  // --qconfig: a QConfig mapping over the flags

  /// The flags' QConfig, validated; `base` gives the fields these flags do not set.
  quant::QConfig qconfig(quant::QConfig base = {}) const;
  /// The per-layer mapping of the flags and --qconfig (qconfig(base) everywhere without a file).
  quant::QConfigMapping qconfig_mapping(quant::QConfig base = {}) const;
};

/// The options add_quant_flags declared, for a tool to extend their descriptions.
struct QuantFlagOptions {
  CLI::Option *bits, *activation_bits, *scheme, *formula, *per_channel, *qconfig;
};

/// Declares the QuantFlags; `applies` prefixes each description (e.g. "qat/deploy: ").
QuantFlagOptions add_quant_flags(CLI::App& app, QuantFlags& flags, const std::string& applies = "");

}  // namespace qflow::tools
