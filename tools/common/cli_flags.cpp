#include "cli_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli_checks.h"
#include "data_setup.h"
#include "qconfig_option.h"
#include "qflow/core/device.h"
#include "qflow/core/error.h"
#include "qflow/models/registry.h"

namespace qflow::tools {

void add_dataset_flags(CLI::App& app, std::string& dataset, std::string& data) {
  app.add_option("--dataset", dataset, "cifar10 | fashion-mnist | mnist | folder (DIR/train and DIR/test of PNGs)")
      ->check(CLI::IsMember(dataset_names()))
      ->capture_default_str();
  app.add_option("--data", data,
                 "Data directory (CIFAR-10: the binary batches or cifar-10-binary.tar.gz; "
                 "Fashion-MNIST default: /usr/share/datasets/fashion-mnist)");
}

CLI::Option* add_dataset_choice(CLI::App& app, const std::string& flag, std::string& dataset, const std::string& help) {
  return app.add_option(flag, dataset, help)->check(CLI::IsMember(dataset_names()));
}

CLI::Option* add_model_flag(CLI::App& app, std::string& model) {
  const std::vector<std::string> models = models::model_names();
  const CLI::Validator known(
      [models](std::string& name) -> std::string {
        if (std::find(models.begin(), models.end(), name) != models.end()) return {};
        return fmt::format("unknown model '{}' (known: {})", name, fmt::join(models, ", "));
      },
      "MODEL");
  return app.add_option("--model", model, fmt::format("Model from the zoo: {}", fmt::join(models, ", ")))
      ->check(known)
      ->capture_default_str();
}

void add_model_shape_flags(CLI::App& app, ModelShapeFlags& shape) {
  app.add_option("--num-classes", shape.num_classes, "Classifier outputs")->check(kPositive)->capture_default_str();
  app.add_option("--in-channels", shape.in_channels, "Input image channels (1 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--image-size", shape.image_size, "Input image height and width (28 for Fashion-MNIST)")
      ->check(kPositive)
      ->capture_default_str();
}

CLI::Option* add_device_flag(CLI::App& app, std::string& device, const std::string& help) {
  const CLI::Validator known(
      [](std::string& text) -> std::string {
        try {
          (void)Device::parse(text);
          return {};
        } catch (const Error& e) {
          return e.message();
        }
      },
      "DEVICE");
  return app.add_option("--device", device, help)->check(known)->capture_default_str();
}

quant::QConfig QuantFlags::qconfig(quant::QConfig base) const {
  base.bits = bits;
  base.activation_bits = activation_bits;
  base.scheme = quant::parse_scheme(scheme);
  base.formula = quant::parse_formula(formula);
  base.per_layer = !per_channel;
  observer.apply_to(base);
  base.validate();
  return base;
}

quant::QConfigMapping QuantFlags::qconfig_mapping(quant::QConfig base) const {
  return tools::qconfig_mapping(qconfig(base), qconfig_file);
}

QuantFlagOptions add_quant_flags(CLI::App& app, QuantFlags& q, const std::string& applies) {
  QuantFlagOptions o;
  o.bits = app.add_option("--bits", q.bits, applies + "Quantization bits (2-16)")
               ->check(kIntegerIn<2, 16>)
               ->capture_default_str();
  o.activation_bits = app.add_option("--activation-bits", q.activation_bits,
                                     applies + "Bits of the activations (2-16) when they differ from the weights' "
                                               "--bits: --bits 4 --activation-bits 8 is W4A8 (default: --bits)")
                          ->check(kIntegerIn<2, 16>);
  o.scheme = app.add_option("--scheme", q.scheme, applies + "Integer grid: symmetric (int8) | affine (uint8)")
                 ->check(CLI::IsMember({"symmetric", "affine"}))
                 ->capture_default_str();
  o.formula = app.add_option("--formula", q.formula, applies + "Scale formula: google | cambricon (power of two, symmetric only)")
                  ->check(CLI::IsMember({"google", "cambricon"}))
                  ->capture_default_str();
  o.per_channel = app.add_flag("--per-channel", q.per_channel, applies + "One weight scale per output channel (default: per layer)");
  q.observer.add_to(app);
  o.qconfig = add_qconfig_option(app, q.qconfig_file);
  return o;
}

}  // namespace qflow::tools
