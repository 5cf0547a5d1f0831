#pragma once
// qflow-graph --compare: the numeric debugger (quant::compare, Note [Numeric debugger]) on a
// data set's test images, for the qat or deploy stage.
#include <string>

#include "graph_options.h"
#include "stages.h"

namespace qflow::tools {

/// Compares the float model with the quantized model `quantized` (context's --stage), colours
/// `quantized`'s nodes by SQNR for the dot file, writes `csv_path` and returns the picture's
/// title line and the worst-layer table to print. The float reference: --float-weights, else
/// the float --weights, else QAT --weights with fake quantization off (deploy weights keep no
/// float weights: --float-weights is required). A model built from float weights is calibrated
/// on --calib-batches training batches first.
struct CompareOutput {
  std::shared_ptr<fx::GraphModule> graph;  // the quantized model, nodes coloured by SQNR
  std::string title;  // "SQNR vs float, 8 test batches of fashion-mnist (256 images): green >= 30 dB, ..."
  std::string table;  // Comparison::table(--worst)
  std::string skipped;  // one line per node not compared, or empty
};
CompareOutput run_compare(const GraphOptions& o, StageContext& context, const std::string& csv_path);

/// Makes a stage built from float weights calibrate on --calib-batches training batches of
/// --compare's data set (before the stage is built).
void prepare_compare(const GraphOptions& o, StageContext& context);

}  // namespace qflow::tools
