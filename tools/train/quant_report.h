#pragma once
// qflow-train's quantization side: loading float weights for QAT, and the results table.
//
// Note [qflow-train quantization]
// --qat: the zoo model (with --weights or --qat-from loaded) is traced on one example image
// and rewritten by quant::quantization_aware_training before the optimizer is built, so the
// optimizer, last.safetensors, best.safetensors and --resume all work on the QAT GraphModule,
// whose state_dict holds the float parameters, the BN and the observer statistics. The
// checkpoint's metadata records the QConfig, and --resume refuses other quantization flags.
// After the last epoch the QAT model becomes its deploy model
// (quant::dequantization_aware_training, saved as deploy.safetensors) and both are evaluated.
// --ptq: the float model (trained, or loaded with --weights/--qat-from) is prepared with
// quant::prepare_ptq, calibrated on --calib-batches training batches (test transform: no
// augmentation), deployed and evaluated.
// Both end with the results table: model | stage | bits | scheme | formula | per-layer | accuracy.
#include <optional>
#include <string>
#include <vector>

#include "qflow/nn/module.h"
#include "qflow/quant/qconfig.h"

namespace qflow::tools {

struct ResultRow {
  std::string stage;                      // float, QAT, deploy, PTQ
  std::optional<quant::QConfig> qconfig;  // none for float
  double accuracy = 0;                    // %
};

/// The rows as a Markdown table (the shape of the published QAT results).
std::string results_table(const std::string& model, const std::vector<ResultRow>& rows);

/// Loads float weights from a plain state_dict (best.safetensors, a PyTorch export) or from a
/// qflow-train training checkpoint (its model.* entries, e.g. last.safetensors).
void load_float_weights(nn::Module& model, const std::string& path);

}  // namespace qflow::tools
