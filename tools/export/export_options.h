#pragma once
// qflow-export's command line.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "qflow/quant/qconfig.h"
#include "qflow/quant/qconfig_mapping.h"
#include "common/qconfig_option.h"

namespace qflow::tools {

struct ExportCliOptions {
  std::string model = "resnet18";
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t image_size = 32;
  /// A float, QAT or deploy state_dict, or a qflow-train training checkpoint (see build_model.h).
  std::string checkpoint;
  std::string stage = "float";  // float | deploy
  std::string out;
  // QConfig of the deploy stage (the flags qflow-train's --qat takes).
  int64_t bits = 8;
  std::optional<int64_t> activation_bits;  // --activation-bits (unset: bits)
  std::string scheme = "symmetric";
  std::string formula = "google";
  bool per_channel = false;
  ObserverFlags observer;    // --observer & co.: must match the QAT model's (learned scales are its parameters)
  std::string qconfig_file;  // --qconfig: a QConfig mapping over the flags above
  // Post-training calibration, for a deploy model from a float checkpoint.
  std::string calibrate;  // data set name; empty = no calibration
  std::string data;
  int64_t calibrate_batches = 8;
  int64_t batch_size = 32;
  // The ONNX file.
  int64_t opset = 13;
  bool static_batch = false;
  /// Batch size of the example input the graph is exported with (and of --save-example's input).
  int64_t batch = 1;
  std::string save_example;
  uint64_t seed = 0;

  quant::QConfig qconfig() const;
  /// The per-layer mapping of the flags and --qconfig (qconfig() everywhere without a file).
  quant::QConfigMapping qconfig_mapping() const;
};

void add_export_options(CLI::App& app, ExportCliOptions& options);

}  // namespace qflow::tools
