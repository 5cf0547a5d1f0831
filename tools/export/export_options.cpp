#include "export_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/cli_checks.h"

namespace qflow::tools {

void add_export_options(CLI::App& app, ExportCliOptions& o) {
  add_model_flag(app, o.model);
  add_model_shape_flags(app, o);
  app.add_option("--checkpoint", o.checkpoint,
                 "Weights to export (.safetensors): a float state_dict (qflow-train's best.safetensors), a training "
                 "checkpoint (last.safetensors), a QAT model's state_dict, or a deploy model's state_dict")
      ->check(CLI::ExistingFile);
  app.add_option("--stage", o.stage,
                 "What to export:\n  float   the model as trained (BatchNormalization kept)\n"
                 "  deploy  the quantized model: Q/DQ activations, int8/uint8 weights, BN folded (needs a QAT or "
                 "deploy checkpoint, or --calibrate)")
      ->check(CLI::IsMember({"float", "deploy"}))
      ->capture_default_str();
  app.add_option("--out", o.out, "The ONNX file to write (default: MODEL_STAGE.onnx)");
  // The deploy stage's QConfig: the flags qflow-train's --qat takes.
  const QuantFlagOptions quant = add_quant_flags(app, o, "deploy: ");
  quant.bits->description(quant.bits->get_description() + "; ONNX at opset 13 takes 8");
  add_dataset_choice(app, "--calibrate", o.calibrate,
                     "Deploy a float checkpoint by post-training calibration on this data set's test split: cifar10 | "
                     "fashion-mnist | mnist | folder");
  app.add_option("--data", o.data, "Data set location for --calibrate (default: the data set's usual place)");
  app.add_option("--calibrate-batches", o.calibrate_batches, "Batches that calibrate the observers")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Calibration batch size")->check(kPositive)->capture_default_str();
  app.add_option("--opset", o.opset, "ONNX opset (13 to 17)")->check(CLI::Range(13, 17))->capture_default_str();
  app.add_flag("--static-batch", o.static_batch, "Fix the batch dimension to --batch instead of a symbolic 'batch'");
  app.add_option("--batch", o.batch, "Batch size of the example input")->check(kPositive)->capture_default_str();
  app.add_option("--save-example", o.save_example,
                 "Also write DIR/input.bin (a seeded random batch, float32) and DIR/expected.bin (qflow's output "
                 "of the exported model on it) for checking the file in a runtime, e.g. "
                 "node tools/onnxruntime/run_onnx.js OUT DIR/input.bin DIMS DIR/output.bin DIR/expected.bin");
  app.add_option("--seed", o.seed, "Seed of the initialisation (without --checkpoint) and of the example input")
      ->capture_default_str();
}

}  // namespace qflow::tools
