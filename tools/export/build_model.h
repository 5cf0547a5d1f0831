#pragma once
// The GraphModule qflow-export writes: the zoo model with the checkpoint's weights, as traced
// (float) or as the deployable quantized model (deploy).
//
// Note [Checkpoint kinds]
// --checkpoint is read with nn::load; a qflow-train training checkpoint (metadata format
// "qflow.training_checkpoint") contributes its "model." entries. The keys tell what it holds:
//   *.input_observer.*   a QAT model's state_dict: float model → quantization_aware_training →
//                        load → dequantization_aware_training (the QAT statistics deployed);
//   *.input_scale        a deploy model's state_dict: the deploy graph is rebuilt from the
//                        float model (QAT on one random batch, which only gives it its shape)
//                        and every value is then loaded from the file, strictly (an older
//                        file's float weights converted exactly to their integers first,
//                        quant::upgrade_deploy_state_dict);
//   anything else        float weights: the float stage, or with --calibrate a deploy model by
//                        post-training quantization (BN folded, observers calibrated on the
//                        data set's test split).
// A deploy stage from float weights without --calibrate is refused: there are no statistics
// to freeze. A training checkpoint that records its QAT QConfig (mapping) must give every layer
// the grid the flags and --qconfig give it (check_trained_qconfig). Every stage quantizes with
// the mapping of the flags and --qconfig (Note [QConfig mapping]): layers it leaves float are
// exported float, and ONNX refuses layers of other widths than 8 bits naming them.
#include <memory>
#include <string>

#include "export_options.h"
#include "qflow/fx/graph_module.h"

namespace qflow::tools {

struct BuiltModel {
  std::shared_ptr<fx::GraphModule> gm;
  Tensor example;
  std::string how;  // one line for the console: "QAT checkpoint run/qat.safetensors, deployed"
};

BuiltModel build_model(const ExportCliOptions& options);

}  // namespace qflow::tools
