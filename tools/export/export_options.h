#pragma once
// qflow-export's command line.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "common/cli_flags.h"

namespace qflow::tools {

// The shared flags (cli_flags.h): the model's shape, and the QConfig of the deploy stage.
struct ExportCliOptions : ModelShapeFlags, QuantFlags {
  std::string model = "resnet18";
  /// A float, QAT or deploy state_dict, or a qflow-train training checkpoint (see build_model.h).
  std::string checkpoint;
  std::string stage = "float";  // float | deploy
  std::string out;
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
};

void add_export_options(CLI::App& app, ExportCliOptions& options);

}  // namespace qflow::tools
