// qflow-train --sensitivity and --mixed-precision: the sensitivity analysis of quant/sensitivity.h
// on a trained float model and a data set's test images.
//
// Note [qflow-train --sensitivity]
// The metric of a mapping is the top-1 test accuracy (on --test-subset images) of the float
// model quantized post-training with that mapping: quant::prepare_ptq, calibrated on the same
// --calib-batches training batches every time (drawn once, seeded by --seed, with the test
// transform: calibration must see what evaluation sees), evaluated in eval mode — the model
// --ptq would deploy, in its float simulation. The quantization flags and --qconfig describe
// the target (e.g. --bits 4 --activation-bits 8: W4A8); each of its quantized layers is
// measured alone, then --mixed-precision DROP searches the fewest most sensitive layers to
// raise to --high-bits (Note [Sensitivity analysis]) and writes the mapping as a --qconfig
// file, which a QAT run takes as it is:
//   qflow-train --qat-from best.safetensors --bits 4 --activation-bits 8 --test-subset 2000
//               --mixed-precision 1 --checkpoint-dir runs/mp
//   qflow-train --qat-from best.safetensors --qconfig runs/mp/mixed_precision.json ...
// The analysis is PTQ because the QAT run comes after it: it tells which layers to keep at
// more bits before any training is spent. Under mpirun every rank calibrates on the same
// batches (identical observers) and evaluates its shard of the test images; rank 0 writes.
// With --device cuda the passes run on the CPU (they trace, fold and copy; prepare_ptq runs
// its example there), and each PTQ model is moved to the GPU, where the calibration batches
// (moved once) and the test images go through it; the float model's accuracy is measured
// there too. Every --observer calibrates on the GPU (the histogram kinds count on the host,
// Note [Histogram observers on a device]), so the analysis is the CPU's up to the GPU's
// float rounding.
#include <chrono>
#include <filesystem>

#include "quant_report.h"
#include "run_log.h"
#include "trainer.h"

namespace qflow::tools {

int Trainer::analyse_sensitivity() {
  const std::string weights = !o_.qat_from.empty() ? o_.qat_from : o_.weights;
  QFLOW_CHECK(!weights.empty(), "qflow-train: --sensitivity needs a trained float model: --qat-from FILE (a "
                                "best.safetensors of a float run)");
  const quant::QConfigMapping target = o_.qconfig_mapping();
  const std::filesystem::path dir(o_.checkpoint_dir);
  if (writes_files()) std::filesystem::create_directories(dir);

  data::DataLoader loader(data_.train, {.batch_size = o_.batch_size, .shuffle = true, .seed = o_.seed,
                                        .num_workers = o_.workers, .transform = data_.test_transform});
  std::vector<Tensor> calibration;
  for (data::Batch& b : loader) {
    if (static_cast<int64_t>(calibration.size()) >= o_.calib_batches) break;
    calibration.push_back(device_.is_cpu() ? b.images : b.images.to(device_));
  }
  // evaluate() runs on the model's device; the passes below copy the float model from the
  // CPU, so it goes back there after its measurement.
  if (!device_.is_cpu()) float_model_->to(device_);
  const double reference = float_accuracy(weights);
  if (!device_.is_cpu()) float_model_->to(Device::cpu());
  int64_t evaluations = 0;
  const quant::MappingMetric accuracy = [&](const quant::QConfigMapping& mapping) {
    auto ptq = quant::prepare_ptq(*float_gm_, example_, mapping);
    if (!device_.is_cpu()) ptq->to(device_);  // with its observers: calibration records on the device
    quant::calibrate(*ptq, calibration);
    ++evaluations;
    return evaluate(*ptq, *test_loader_, &world_).accuracy;
  };
  const std::string images = fmt::format("{} test images", data_.test->size());
  fmt::print("qflow-train: sensitivity of {} to {} ({} calibration batches of {}, {}{})\n", o_.model,
             quant::to_string(target.global()), calibration.size(), o_.batch_size, images,
             device_.is_cpu() ? std::string() : fmt::format(", calibrated and evaluated on {}", device_));
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const quant::SensitivityReport report = quant::layer_sensitivity(
      quant::quantizable_layers(*float_gm_), target, reference, accuracy,
      [&](size_t i, size_t n, const std::string& path) {
        const double elapsed = seconds();
        fmt::print("qflow-train: [{}/{}] {} alone{}\n", i + 1, n, path,
                   i == 0 ? std::string() : fmt::format(" (ETA {:.0f} s)", elapsed / static_cast<double>(i) * (n - i)));
        std::fflush(stdout);
      });
  fmt::print("\nqflow-train: accuracy with one layer quantized, the rest float (float model {:.2f}%, {}):\n{}",
             reference, images, report.table());
  if (writes_files()) {
    replace_file((dir / "sensitivity.csv").string(), report.to_csv());
    fmt::print("qflow-train: wrote {}\n", (dir / "sensitivity.csv").string());
  }
  if (!o_.mixed_precision) return 0;

  fmt::print("\nqflow-train: mixed precision: the fewest layers at {} bits for a drop of at most {:g} points\n",
             o_.high_bits, *o_.mixed_precision);
  const quant::MixedPrecision mp =
      quant::choose_mixed_precision(report, target, o_.high_bits, *o_.mixed_precision, accuracy);
  for (const quant::MixedPrecisionTrial& t : mp.trials)
    fmt::print("  {:>3} most sensitive layers at {} bits: accuracy {:.2f}%  drop {:.2f}\n", t.raised, o_.high_bits,
               t.metric, t.drop);
  fmt::print("qflow-train: {}\n", mp.to_string(o_.high_bits, *o_.mixed_precision));
  if (writes_files()) {
    const std::string file = (dir / "mixed_precision.json").string();
    replace_file(file, mp.mapping.to_json() + "\n");
    fmt::print("qflow-train: wrote {} — train it with: qflow-train --qat-from {} --qconfig {} ...\n", file, weights,
               file);
  }
  fmt::print("qflow-train: {} PTQ evaluations in {:.0f} s\n", evaluations, seconds());
  return mp.within ? 0 : 2;
}

}  // namespace qflow::tools
