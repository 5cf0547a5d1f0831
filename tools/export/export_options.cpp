#include "export_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/cli_checks.h"
#include "common/qconfig_option.h"
#include "qflow/models/registry.h"

namespace qflow::tools {

quant::QConfig ExportCliOptions::qconfig() const {
  quant::QConfig qc{.bits = bits, .scheme = quant::parse_scheme(scheme), .formula = quant::parse_formula(formula),
                    .per_layer = !per_channel, .activation_bits = activation_bits};
  observer.apply_to(qc);
  qc.validate();
  return qc;
}

quant::QConfigMapping ExportCliOptions::qconfig_mapping() const { return tools::qconfig_mapping(qconfig(), qconfig_file); }

void add_export_options(CLI::App& app, ExportCliOptions& o) {
  const std::vector<std::string> models = models::model_names();
  app.add_option("--model", o.model, fmt::format("Model from the zoo: {}", fmt::join(models, ", ")))
      ->check(CLI::IsMember(models))
      ->capture_default_str();
  app.add_option("--num-classes", o.num_classes, "Classifier outputs")->check(kPositive)->capture_default_str();
  app.add_option("--in-channels", o.in_channels, "Input image channels (1 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--image-size", o.image_size, "Input image height and width (28 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
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
  app.add_option("--bits", o.bits, "Quantization bits (ONNX at opset 13 takes 8)")->capture_default_str();
  add_activation_bits_option(app, o.activation_bits);
  app.add_option("--scheme", o.scheme, "Integer grid: symmetric (int8) | affine (uint8)")
      ->check(CLI::IsMember({"symmetric", "affine"}))
      ->capture_default_str();
  app.add_option("--formula", o.formula, "Scale formula: google | cambricon (power of two, symmetric only)")
      ->check(CLI::IsMember({"google", "cambricon"}))
      ->capture_default_str();
  app.add_flag("--per-channel", o.per_channel, "One weight scale per output channel (default: per layer)");
  o.observer.add_to(app);
  add_qconfig_option(app, o.qconfig_file);
  app.add_option("--calibrate", o.calibrate,
                 "Deploy a float checkpoint by post-training calibration on this data set's test split: cifar10 | "
                 "fashion-mnist | mnist | folder")
      ->check(CLI::IsMember({"cifar10", "fashion-mnist", "mnist", "folder"}));
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
