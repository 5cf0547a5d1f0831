#include "graph_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/cli_checks.h"
#include "common/qconfig_option.h"
#include "qflow/models/registry.h"
#include "stages.h"

namespace qflow::tools {

void add_graph_options(CLI::App& app, GraphOptions& o) {
  const std::vector<std::string> models = models::model_names();
  app.add_option("--model", o.model, fmt::format("Model from the zoo: {}", fmt::join(models, ", ")))
      ->check(CLI::IsMember(models))
      ->capture_default_str();
  std::string stage_help = "Which graph to draw:";
  for (const Stage& s : stages())
    stage_help += fmt::format("\n  {:7} {}", s.name, s.description);
  app.add_option("--stage", o.stage, stage_help)->check(CLI::IsMember(stage_names()))->capture_default_str();
  app.add_option("--num-classes", o.num_classes, "Classifier outputs")->check(kPositive)->capture_default_str();
  app.add_option("--in-channels", o.in_channels, "Input image channels (1 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--image-size", o.image_size, "Input image height and width (28 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "Batch size of the example input whose shapes label the nodes")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--weights", o.weights, "Load a state_dict (.safetensors, e.g. qflow-train's best.safetensors) first")
      ->check(CLI::ExistingFile);
  app.add_option("--out", o.out, "The dot file to write (default: MODEL_STAGE.dot)");
  app.add_flag("--png", o.png, "Also render OUT with .png (needs Graphviz's dot)");
  app.add_flag("--svg", o.svg, "Also render OUT with .svg (needs Graphviz's dot)");
  app.add_flag("--print", o.print, "Print the graph in FX's text form and as generated code");
  app.add_option("--rankdir", o.rankdir, "Layout direction: TB (top to bottom) or LR")
      ->check(CLI::IsMember({"TB", "LR"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the model's initialisation (without --weights)")->capture_default_str();
  app.add_option("--bits", o.bits, "qat/deploy: quantization bits (2-16)")->check(CLI::Range(2, 16))->capture_default_str();
  add_activation_bits_option(app, o.activation_bits);
  app.add_option("--scheme", o.scheme, "qat/deploy: symmetric | affine")
      ->check(CLI::IsMember({"symmetric", "affine"}))
      ->capture_default_str();
  app.add_option("--formula", o.formula, "qat/deploy: google | cambricon")
      ->check(CLI::IsMember({"google", "cambricon"}))
      ->capture_default_str();
  app.add_flag("--per-channel", o.per_channel, "qat/deploy: one weight scale per output channel");
  app.add_option("--compare", o.compare,
                 "Numeric debugger: run the float model and the --stage qat/deploy model on DATASET's test images "
                 "(cifar10 | fashion-mnist | mnist | folder), colour the graph by each node's SQNR, write OUT.csv "
                 "and print the worst layers")
      ->check(CLI::IsMember({"cifar10", "fashion-mnist", "mnist", "folder"}));
  app.add_option("--data", o.data, "--compare: the data set's directory (Fashion-MNIST default: "
                                   "/usr/share/datasets/fashion-mnist)");
  app.add_option("--compare-batches", o.compare_batches, "--compare: test batches of --batch images")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--calib-batches", o.calib_batches,
                 "--compare from float weights: training batches that calibrate the quantized model")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--float-weights", o.float_weights,
                 "--compare: the float model's state_dict to compare with (default: the float weights of --weights, "
                 "with fake quantization off for QAT weights)")
      ->check(CLI::ExistingFile);
  app.add_option("--worst", o.worst, "--compare: how many of the worst layers to print")
      ->check(kPositive)
      ->capture_default_str();
  o.observer.add_to(app);
  add_qconfig_option(app, o.qconfig_file);
}

nn::ModulePtr create_model(const GraphOptions& o) {
  return models::create(o.model,
                        {.num_classes = o.num_classes, .in_channels = o.in_channels, .image_size = o.image_size});
}

}  // namespace qflow::tools
