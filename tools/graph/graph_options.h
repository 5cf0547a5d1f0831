#pragma once
// qflow-graph's command line.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "common/qconfig_option.h"
#include "qflow/nn/module.h"

namespace qflow::tools {

struct GraphOptions {
  std::string model = "resnet18";
  std::string stage = "float";
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t image_size = 32;
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
  // The qat and deploy stages' QConfig (must match --weights from a quantized model).
  int64_t bits = 8;
  std::optional<int64_t> activation_bits;  // --activation-bits (unset: bits)
  std::string scheme = "symmetric";
  std::string formula = "google";
  bool per_channel = false;
  // --compare: the numeric debugger (compare.h).
  std::string compare;        // a data set name; empty: draw the graph only
  std::string data;           // its directory (empty: the data set's default)
  int64_t compare_batches = 8;  // test batches of --batch images
  int64_t calib_batches = 4;    // training batches calibrating a model built from float weights
  std::string float_weights;  // the float reference when --weights is quantized
  int64_t worst = 10;         // rows of the printed table
  ObserverFlags observer;    // --observer & co. of the qat/deploy stages
  std::string qconfig_file;  // --qconfig: a QConfig mapping over the flags above
};

void add_graph_options(CLI::App& app, GraphOptions& options);

/// The zoo model the options name (--model, --num-classes, --in-channels, --image-size).
nn::ModulePtr create_model(const GraphOptions& o);

}  // namespace qflow::tools
