// The Trainer's quantization steps; see Note [qflow-train quantization] in quant_report.h.
#include <algorithm>
#include <filesystem>

#include "qflow/fx/fx.h"
#include "qflow/quant/learned_quantizer.h"
#include "integer_agreement.h"
#include "quant_report.h"
#include "trainer.h"

namespace qflow::tools {

// Note [Recorded test accuracy]
// QAT from float weights reports the float model's test accuracy beside the QAT one. When the
// weights are a best.safetensors written by qflow-train, the run that wrote them has already
// evaluated exactly these weights, and the file's metadata says on which test images
// (Trainer::test_set_tag) and of which quantization ("none" for float). If both match this
// run, evaluating again would only repeat the same computation (about a minute for 10,000
// images on 2 cores), so the recorded figure is used; any other file is evaluated.
namespace {

std::optional<EvalResult> recorded_float_accuracy(const std::string& path, const std::string& test_set) {
  nn::CheckpointMetadata meta;
  (void)nn::load(path, &meta);
  const auto get = [&](const char* key) { return meta.count(key) ? meta.at(key) : std::string(); };
  if (get("quant") != "none" || get("test_set") != test_set || get("test_accuracy").empty()) return std::nullopt;
  try {
    return EvalResult{.loss = std::stod(get("test_loss")), .accuracy = std::stod(get("test_accuracy"))};
  } catch (const std::exception&) {  // a hand-edited or foreign file: measure instead
    return std::nullopt;
  }
}

}  // namespace

std::string Trainer::quant_tag() const {
  return o_.qat ? "qat " + quant::to_string(o_.qconfig_mapping().global()) : "none";
}

// Learned quantization scales (LSQ, TQT) train in a group of their own without weight decay
// (quant::learned_quantization_parameters says why); without them one group, as always, so
// the optimizer state of earlier checkpoints still loads.
std::unique_ptr<nn::optim::SGD> Trainer::make_optimizer() {
  const nn::optim::SGDOptions options{.lr = o_.lr, .momentum = o_.momentum, .weight_decay = o_.weight_decay};
  const std::vector<Tensor> learned = quant::learned_quantization_parameters(*model_);
  if (learned.empty()) return std::make_unique<nn::optim::SGD>(model_->parameters(), options);
  std::vector<Tensor> rest;
  for (const Tensor& p : model_->parameters())
    if (std::none_of(learned.begin(), learned.end(), [&](const Tensor& l) { return l.impl() == p.impl(); }))
      rest.push_back(p);
  nn::optim::SGDOptions no_decay = options;
  no_decay.weight_decay = 0.0;
  fmt::print("qflow-train: {} learned quantization parameters (scales, thresholds) train without weight decay\n",
             learned.size());
  return std::make_unique<nn::optim::SGD>(
      std::vector<nn::optim::SGD::Group>{{std::move(rest), options}, {learned, no_decay}});
}

std::string Trainer::qconfig_mapping_tag() const { return o_.qat ? o_.qconfig_mapping().to_json() : ""; }

double Trainer::float_accuracy(const std::string& weights) {
  if (const auto recorded = recorded_float_accuracy(weights, test_set_tag())) {
    fmt::print("qflow-train: float model: test loss {:.4f}  accuracy {:.2f}% (recorded in {} by the run that "
               "evaluated it on the same {} test images)\n",
               recorded->loss, recorded->accuracy, weights, test_loader_->dataset().size());
    return recorded->accuracy;
  }
  const EvalResult r = evaluate(*float_model_, *test_loader_, &world_);
  fmt::print("qflow-train: float model: test loss {:.4f}  accuracy {:.2f}%\n", r.loss, r.accuracy);
  return r.accuracy;
}

void Trainer::setup_quant() {
  if (!o_.qat && !o_.ptq && !o_.analyses_sensitivity()) {
    QFLOW_CHECK(o_.qconfig_file.empty(), "qflow-train: --qconfig {} quantizes layers: give it with --qat or --ptq",
                o_.qconfig_file);
    return;
  }
  const quant::QConfigMapping mapping = o_.qconfig_mapping();  // validates the flags and the file before any work
  if (!o_.qat_from.empty()) load_float_weights(*model_, o_.qat_from);
  float_model_ = model_;
  // Zeros: the passes only need the shapes, and drawing an input would move the random stream.
  example_ = zeros({1, data_.channels, data_.image_size, data_.image_size});
  float_gm_ = fx::symbolic_trace(float_model_, example_);
  if (!o_.qat) return;
  const bool from_float = !o_.qat_from.empty() || !o_.weights.empty();
  if (from_float && !o_.resume && !o_.eval_only)
    float_acc_ = float_accuracy(o_.qat_from.empty() ? o_.weights : o_.qat_from);
  quant::PassSummary summary;
  model_ = quant::quantization_aware_training(*float_gm_, example_, mapping, &summary);
  model_->train();
  fmt::print("{}", summary.to_string());
}

namespace {

// The deploy model as it runs in integers (Note [Integer activations]), the model the deploy
// and PTQ rows measure: its integer layers chained by quant::fuse_integer_layers; says which
// layers stay in float and why.
std::shared_ptr<fx::GraphModule> integer_model(std::shared_ptr<fx::GraphModule> deploy) {
  deploy->eval();
  const quant::IntegerFusions fusions = quant::fuse_integer_layers(*deploy);
  const std::vector<std::string> floats = quant::float_layers(*deploy);
  fmt::print("qflow-train: deploy model in integers ({}); {}\n", fusions.to_string(),
             floats.empty() ? std::string("every quantized convolution and linear layer runs int8")
                            : fmt::format("{} layers run the float simulation:\n  {}", floats.size(),
                                          fmt::join(floats, "\n  ")));
  return deploy;
}

}  // namespace

data::DataLoader& Trainer::report_loader() {
  if (world_.size() == 1) return *test_loader_;
  if (!report_loader_)
    report_loader_ = std::make_unique<data::DataLoader>(
        data_.test, data::DataLoaderOptions{.batch_size = 256, .num_workers = o_.workers, .transform = data_.test_transform});
  return *report_loader_;
}

void Trainer::report_quant(std::optional<EvalResult> last) {
  if (!o_.qat && !o_.ptq) return;
  // The deploy pass, the calibration and the integer model run on the CPU (Note [qflow-train
  // --device]); training is over.
  if (!model_->device().is_cpu()) model_->to(Device::cpu());
  const quant::QConfigMapping mapping = o_.qconfig_mapping();
  // The table's bits/scheme/... columns show the global QConfig; a mapping with rules marks the
  // stage, whose layers may differ.
  const std::optional<quant::QConfig> qconfig = mapping.global();
  const auto stage_name = [&](const std::string& stage) {
    return mapping.rules().empty() ? stage : stage + " (--qconfig)";
  };
  const auto accuracy = [&](nn::Module& m) { return evaluate(m, report_loader()).accuracy; };
  // A deployed model's row: in integers, beside its float simulation on the same images.
  const auto integer_result = [&](const std::string& stage, std::shared_ptr<fx::GraphModule> deploy) {
    const IntegerAgreement a = measure_integer_agreement(*integer_model(std::move(deploy)), report_loader());
    fmt::print("qflow-train: {} in integers: accuracy {:.2f}%, float simulation {:.2f}%, same argmax on {:.2f}% of {} "
               "test images\n", stage, a.integer_accuracy, a.simulated_accuracy, a.same_argmax, a.images);
    ResultRow row = integer_row(stage, qconfig, a);
    row.stage = stage_name(row.stage);
    return row;
  };
  std::vector<ResultRow> rows;
  if (o_.qat) {
    if (float_acc_) rows.push_back({.stage = "float", .accuracy = *float_acc_});
    rows.push_back({.stage = stage_name("QAT"), .qconfig = qconfig, .accuracy = last ? last->accuracy : accuracy(*model_)});
    const auto qat = std::dynamic_pointer_cast<fx::GraphModule>(model_);
    auto deploy = quant::dequantization_aware_training(*float_gm_, *qat, example_, mapping);
    const std::string file = (std::filesystem::path(o_.checkpoint_dir) / "deploy.safetensors").string();
    std::filesystem::create_directories(o_.checkpoint_dir);
    nn::save(deploy->state_dict(), file);
    fmt::print("qflow-train: deploy model (BN folded, weights as the integers of their grids) saved to {}\n", file);
    rows.push_back(integer_result("deploy", deploy));
  } else {
    rows.push_back({.stage = "float", .accuracy = last ? last->accuracy : accuracy(*model_)});
  }
  if (o_.ptq) {
    quant::PassSummary summary;
    auto ptq = quant::prepare_ptq(*float_gm_, example_, mapping, &summary);
    fmt::print("{}", summary.to_string());
    data::DataLoader calibration(data_.train, {.batch_size = o_.batch_size, .shuffle = true, .seed = o_.seed,
                                               .num_workers = o_.workers, .transform = data_.test_transform});
    const int64_t batches = quant::calibrate(*ptq, calibration, o_.calib_batches);
    auto deploy = quant::dequantization_aware_training(*float_gm_, *ptq, example_, mapping);
    rows.push_back(integer_result("PTQ", deploy));
    fmt::print("qflow-train: PTQ model calibrated on {} training batches\n", batches);
  }
  write_results(o_.checkpoint_dir, o_.model, rows, static_cast<int64_t>(report_loader().dataset().size()));
  fmt::print("\n{}", results_table(o_.model, rows));
}

}  // namespace qflow::tools
