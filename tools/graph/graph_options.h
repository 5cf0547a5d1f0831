#pragma once
// qflow-graph's command line.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "common/cli_flags.h"
#include "qflow/nn/module.h"

namespace qflow::tools {

// The shared flags (cli_flags.h): the model's shape, and the QConfig of the qat and deploy
// stages (it must match --weights from a quantized model).
struct GraphOptions : ModelShapeFlags, QuantFlags {
  std::string model = "resnet18";
  std::string stage = "float";
  /// Batch size of the example input (the shapes drawn on the nodes).
  int64_t batch = 1;
  std::string weights;
  /// Empty: <model>_<stage>.dot in the current directory.
  std::string out;
  bool png = false;
  bool svg = false;
  bool print = false;
  std::string rankdir = "TB";
  uint64_t seed = 0;
  // --compare: the numeric debugger (compare.h).
  std::string compare;        // a data set name; empty: draw the graph only
  std::string data;           // its directory (empty: the data set's default)
  int64_t compare_batches = 8;  // test batches of --batch images
  int64_t calib_batches = 4;    // training batches calibrating a model built from float weights
  std::string float_weights;  // the float reference when --weights is quantized
  int64_t worst = 10;         // rows of the printed table
};

void add_graph_options(CLI::App& app, GraphOptions& options);

/// The zoo model the options name (--model, --num-classes, --in-channels, --image-size).
nn::ModulePtr create_model(const GraphOptions& o);

}  // namespace qflow::tools
