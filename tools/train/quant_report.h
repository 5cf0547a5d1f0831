#pragma once
// qflow-train's quantization side: loading float weights for QAT, and the results table.
//
// Note [qflow-train quantization]
// --qat: the zoo model (with --weights or --qat-from loaded) is traced on one example image
// and rewritten by quant::quantization_aware_training before the optimizer is built, so the
// optimizer, last.safetensors, best.safetensors and --resume all work on the QAT GraphModule,
// whose state_dict holds the float parameters, the BN and the observer statistics. The
// checkpoint's metadata records the global QConfig ("quant") and the whole QConfig mapping
// ("qconfig_mapping", its canonical JSON: the flags, or --qconfig FILE.json over them), and
// --resume refuses other quantization flags or another mapping.
// After the last epoch the QAT model becomes its deploy model
// (quant::dequantization_aware_training, saved as deploy.safetensors) and both are evaluated.
// --ptq: the float model (trained, or loaded with --weights/--qat-from) is prepared with
// quant::prepare_ptq, calibrated on --calib-batches training batches (test transform: no
// augmentation), deployed and evaluated.
// Both measure the deploy model as it runs, in integers (quant::fuse_integer_layers), against
// its float simulation on the same test images (integer_agreement.h), and end with the results
// table, printed and written to results.csv and results.md in the checkpoint directory:
// model | stage | bits | scheme | formula | per-layer | accuracy | float simulation | same argmax
// (the last two for the deploy and PTQ rows, whose stage says how much runs int8: "deploy (int8)").
#include <optional>
#include <string>
#include <vector>

#include "qflow/nn/module.h"
#include "integer_agreement.h"
#include "qflow/quant/qconfig.h"

namespace qflow::tools {

struct ResultRow {
  std::string stage;                      // float, QAT, deploy (int8), PTQ (int8)
  std::optional<quant::QConfig> qconfig = std::nullopt;  // none for float (and for a --qconfig whose global is none)
  double accuracy = 0;                    // %
  // Deploy and PTQ rows: the float simulation's accuracy and the % of images with the same argmax.
  std::optional<double> simulated_accuracy = std::nullopt, same_argmax = std::nullopt;
};

/// The row of a deployed model (deploy, PTQ): its accuracy in integers beside the simulation's.
ResultRow integer_row(const std::string& stage, const std::optional<quant::QConfig>& qconfig, const IntegerAgreement& a);

/// The rows as a Markdown table (the shape of the published QAT results).
std::string results_table(const std::string& model, const std::vector<ResultRow>& rows);

/// Writes the rows to DIR/results.csv (one line per row; test_images = how many were evaluated)
/// and DIR/results.md (the table), each replaced whole.
void write_results(const std::string& dir, const std::string& model, const std::vector<ResultRow>& rows,
                   int64_t test_images);

/// Loads float weights from a plain state_dict (best.safetensors, a PyTorch export) or from a
/// qflow-train training checkpoint (its model.* entries, e.g. last.safetensors).
void load_float_weights(nn::Module& model, const std::string& path);

}  // namespace qflow::tools
