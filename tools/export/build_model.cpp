#include "build_model.h"

#include <fmt/format.h>

#include "common/data_setup.h"
#include "qflow/qflow.h"
#include "qflow/fx/fx.h"

namespace qflow::tools {
namespace {

enum class Kind { Float, Qat, Deploy };

nn::StateDict read_checkpoint(const std::string& path, nn::CheckpointMetadata& meta) {
  nn::StateDict all = nn::load(path, &meta);
  const auto format = meta.find("format");
  if (format == meta.end() || format->second != "qflow.training_checkpoint") return all;
  nn::StateDict model;
  for (const auto& [key, value] : all)
    if (key.rfind("model.", 0) == 0) model.insert(key.substr(6), value);
  return model;
}

Kind kind_of(const nn::StateDict& sd) {
  for (const auto& [key, value] : sd) {
    if (key.find(".input_observer.") != std::string::npos) return Kind::Qat;
    if (key.ends_with(".input_scale")) return Kind::Deploy;
  }
  return Kind::Float;
}

/// The deploy model of `float_gm` calibrated on `loader`'s first batches (post-training).
std::shared_ptr<fx::GraphModule> calibrated_deploy(const fx::GraphModule& float_gm, const Tensor& example,
                                                   const ExportCliOptions& o) {
  const quant::QConfigMapping mapping = o.qconfig_mapping();
  auto ptq = quant::prepare_ptq(float_gm, example, mapping);
  DataOptions d{.dataset = o.calibrate, .data = o.data, .augment = false, .test_subset = o.calibrate_batches * o.batch_size,
                .load_train = false};
  const DataSetup setup = make_data(d);
  QFLOW_CHECK(setup.channels == o.in_channels && setup.image_size == o.image_size,
              "{} images are {}x{}x{}, the model takes {}x{}x{} (set --in-channels/--image-size)",
              o.calibrate, setup.channels, setup.image_size, setup.image_size, o.in_channels, o.image_size, o.image_size);
  data::DataLoader loader(setup.test, {.batch_size = o.batch_size, .transform = setup.test_transform});
  quant::calibrate(*ptq, loader, o.calibrate_batches);
  return quant::dequantization_aware_training(float_gm, *ptq, example, mapping);
}

// The grid a QConfig puts a layer's numbers on (what observer statistics are ranges on):
// "QConfig(bits=8, scheme=symmetric, formula=google, per_layer=true", or "float".
std::string grid_of(const std::optional<quant::QConfig>& qc) {
  const std::string text = quant::to_string(qc);
  return text.substr(0, text.find(", momentum"));
}

/// qflow-train's training checkpoints record the QAT QConfig ("quant": "qat QConfig(bits=8,
/// ...)") and the QConfig mapping ("qconfig_mapping", Note [QConfig mapping]). Observers store
/// ranges, not grids, so statistics trained for one grid would load silently under another:
/// the flags and --qconfig must give every layer of `float_gm` the grid it was trained with.
void check_trained_qconfig(const nn::CheckpointMetadata& meta, const quant::QConfigMapping& mapping,
                           const fx::GraphModule& float_gm, const std::string& path) {
  const auto tag = meta.find("quant");
  if (tag == meta.end()) return;
  const auto recorded = meta.find("qconfig_mapping");
  if (recorded == meta.end() || recorded->second.empty()) {
    // Written before mappings: one QConfig for every layer.
    const std::string grid = grid_of(mapping.global());
    QFLOW_CHECK(mapping.rules().empty() && tag->second.find(grid) != std::string::npos,
                "{} was trained with quantization '{}', but the flags ask for {}){}; pass the same --bits, --scheme, "
                "--formula and --per-channel",
                path, tag->second, grid,
                mapping.rules().empty() ? "" : " with --qconfig's per-layer rules (it predates QConfig mappings: one "
                                               "QConfig for every layer)");
    return;
  }
  const quant::QConfigMapping trained = quant::QConfigMapping::from_json(recorded->second, {}, path + " (qconfig_mapping)");
  for (const auto& [layer, type] : quant::quantizable_layers(float_gm)) {
    const std::string want = grid_of(trained.resolve(layer, type)), got = grid_of(mapping.resolve(layer, type));
    QFLOW_CHECK(want == got,
                "{} was trained with layer '{}' at {} (its QConfig mapping's {}), but the flags and --qconfig give it "
                "{} (their {}); pass the --qconfig file and flags it was trained with",
                path, layer, want, trained.deciding_rule(layer, type), got, mapping.deciding_rule(layer, type));
  }
}

}  // namespace

BuiltModel build_model(const ExportCliOptions& o) {
  manual_seed(o.seed);
  nn::ModulePtr model = models::create(o.model, {.num_classes = o.num_classes, .in_channels = o.in_channels,
                                                 .image_size = o.image_size});
  const Tensor example = randn({o.batch, o.in_channels, o.image_size, o.image_size});
  nn::StateDict sd;
  nn::CheckpointMetadata meta;
  Kind kind = Kind::Float;
  if (!o.checkpoint.empty()) {
    sd = read_checkpoint(o.checkpoint, meta);
    kind = kind_of(sd);
  }
  if (kind == Kind::Float && !sd.empty()) model->load_state_dict(sd);
  model->eval();
  auto float_gm = fx::symbolic_trace(model, example);
  const std::string weights = o.checkpoint.empty() ? fmt::format("random weights (seed {})", o.seed) : o.checkpoint;

  if (o.stage == "float") {
    QFLOW_CHECK(kind == Kind::Float, "{} holds a {} model; --stage float needs float weights",
                o.checkpoint, kind == Kind::Qat ? "QAT" : "deploy");
    return {float_gm, example, fmt::format("float model, {}", weights)};
  }
  const quant::QConfigMapping mapping = o.qconfig_mapping();
  const std::string numerics = mapping.rules().empty() ? quant::to_string(mapping.global())
                                                       : fmt::format("QConfig mapping {}", o.qconfig_file);
  if (kind == Kind::Float) {
    QFLOW_CHECK(!o.calibrate.empty(),
                "--stage deploy needs quantization statistics: a QAT or deploy checkpoint "
                "(qflow-train --qat), or --calibrate DATASET to calibrate {} post-training",
                o.checkpoint.empty() ? "the model" : o.checkpoint);
    return {calibrated_deploy(*float_gm, example, o), example,
            fmt::format("{}, calibrated on {} batches of {} ({})", weights, o.calibrate_batches, o.calibrate,
                        numerics)};
  }
  check_trained_qconfig(meta, mapping, *float_gm, o.checkpoint);
  auto qat = quant::quantization_aware_training(*float_gm, example, mapping);
  if (kind == Kind::Qat) {
    qat->load_state_dict(sd);
    return {quant::dequantization_aware_training(*float_gm, *qat, example, mapping), example,
            fmt::format("QAT checkpoint {}, deployed ({})", o.checkpoint, numerics)};
  }
  // A deploy state_dict: one random batch gives the observers a range so the deploy pass can
  // build the graph; every value is then replaced by the file's (strict load). A file of an
  // older qflow holds float weights, converted exactly to the integers the layers store now.
  quant::calibrate(*qat, std::vector<Tensor>{example});
  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, example, mapping);
  // Float weights are in files of an older qflow, which had one QConfig for every layer.
  const size_t upgraded = mapping.global() ? quant::upgrade_deploy_state_dict(sd, *mapping.global()) : 0;
  deploy->load_state_dict(sd);
  return {deploy, example,
          fmt::format("deploy checkpoint {} ({}{})", o.checkpoint, numerics,
                      upgraded ? fmt::format("; {} float weights converted to their integers", upgraded) : "")};
}

}  // namespace qflow::tools
