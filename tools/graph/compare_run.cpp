#include "compare_run.h"

#include "common/data_setup.h"
#include "qflow/qflow.h"
#include "qflow/quant/quant.h"
#include "render.h"

namespace qflow::tools {
namespace {

DataSetup compare_data(const GraphOptions& o, bool train) {
  // Only the test images compared are read beyond the file itself (Subset keeps the first N).
  DataSetup d = make_data({.dataset = o.compare, .data = o.data, .augment = false,
                           .test_subset = o.compare_batches * o.batch, .load_train = train, .load_test = !train});
  QFLOW_CHECK(d.channels == o.in_channels && d.image_size == o.image_size,
              "--compare {}: its images are {} channel(s) of {}x{}, the model takes {} of {}x{} (pass --in-channels {} "
              "--image-size {})",
              o.compare, d.channels, d.image_size, d.image_size, o.in_channels, o.image_size, o.image_size, d.channels,
              d.image_size);
  return d;
}

// The model every node of the quantized one is compared with (see compare_run.h).
std::shared_ptr<fx::GraphModule> float_reference(const GraphOptions& o, StageContext& c) {
  if (!o.float_weights.empty()) {
    const nn::StateDict weights = nn::load(o.float_weights);
    QFLOW_CHECK(weights_kind(weights) == WeightsKind::Float,
                "--float-weights {} holds a quantized model's state; give a float model's (e.g. the best.safetensors "
                "a QAT run was started from with --qat-from)",
                o.float_weights);
    nn::ModulePtr model = create_model(o);
    model->load_state_dict(weights);
    model->eval();
    return fx::symbolic_trace(model, c.example());
  }
  switch (c.quant_weights_kind()) {
    case WeightsKind::Float: return c.float_graph();
    case WeightsKind::Qat: {
      auto reference = c.qat_graph();  // a model of its own: qat_graph builds a new one per call
      quant::enable_fake_quant(*reference, false);
      return reference;
    }
    case WeightsKind::Deploy: break;
  }
  QFLOW_FAIL("--compare with deploy --weights needs --float-weights FILE: a deploy model keeps only its quantized "
             "weights, so the float model to compare with has to come from elsewhere");
}

}  // namespace

void prepare_compare(const GraphOptions& o, StageContext& context) {
  QFLOW_CHECK(o.stage == "qat" || o.stage == "deploy",
              "--compare compares a quantized model with its float one: pass --stage qat or --stage deploy (not {})",
              o.stage);
  if (context.quant_weights_kind() != WeightsKind::Float) return;  // scales come with the weights
  const DataSetup d = compare_data(o, /*train=*/true);
  data::DataLoader loader(d.train, {.batch_size = o.batch, .transform = d.test_transform});
  std::vector<Tensor> batches;
  for (data::Batch& b : loader) {
    if (static_cast<int64_t>(batches.size()) >= o.calib_batches) break;
    batches.push_back(b.images);
  }
  context.set_calibration(std::move(batches));
}

CompareOutput run_compare(const GraphOptions& o, StageContext& context, const std::string& csv_path) {
  auto quantized = build_stage(o.stage, context);
  auto reference = float_reference(o, context);
  const DataSetup d = compare_data(o, /*train=*/false);
  data::DataLoader loader(d.test, {.batch_size = o.batch, .transform = d.test_transform});
  const quant::Comparison c = quant::compare(*reference, *quantized, loader, o.compare_batches);
  write_text_file(csv_path, c.to_csv());
  quant::annotate_sqnr(*quantized, c);
  CompareOutput out;
  out.title = fmt::format("SQNR vs float, {} test batch{} of {} ({} images): {}", c.batches, c.batches == 1 ? "" : "es",
                          o.compare, d.test->size(), quant::sqnr_legend());
  out.table = c.table(static_cast<size_t>(o.worst));
  for (const std::string& s : c.skipped) out.skipped += "  " + s + "\n";
  out.graph = quantized;
  return out;
}

}  // namespace qflow::tools
