#pragma once
// --qconfig FILE.json, the per-layer quantization of qflow-train, qflow-export and qflow-graph
// (Note [QConfig mapping] in quant/qconfig_mapping.h). The quantization flags (--bits,
// --scheme, --formula, --per-channel, ...) describe the mapping's defaults: without --qconfig
// they are the QConfig of every layer; with it, the file's "global" starts from them (the
// fields the file names win) and each rule from that global. So `--bits 4 --qconfig f.json`
// with f.json = {"rules": [{"path": "conv1", "qconfig": {"bits": 8}}]} is 4 bits everywhere
// but conv1.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "qflow/quant/qconfig_mapping.h"

namespace qflow::tools {

/// Declares --qconfig on `app`, writing the file's path into `file`.
inline CLI::Option* add_qconfig_option(CLI::App& app, std::string& file) {
  return app
      .add_option("--qconfig", file,
                  "Per-layer quantization: a JSON QConfig mapping ({\"global\": {...}, \"rules\": [{\"path\" | "
                  "\"path_regex\" | \"type\": ..., \"qconfig\": {...} | \"none\"}]}); the quantization flags are "
                  "its defaults")
      ->check(CLI::ExistingFile);
}

/// --observer and its knobs (QConfig::observer, percentile, scale_init, learn_zero_point;
/// Note [Learned scales], Note [Histogram observers]), shared by the tools that build a QConfig.
struct ObserverFlags {
  std::string observer = "moving_average";
  double percentile = 99.99;
  std::string scale_init = "lsq";
  bool learn_zero_point = false;

  /// Declares --observer, --percentile, --scale-init and --learn-zero-point on `app`.
  void add_to(CLI::App& app) {
    app.add_option("--observer", observer,
                   "What sets the scales: moving_average (default) | minmax | lsq (learned, Esser et al.) | tqt "
                   "(learned power-of-two thresholds, Jain et al.; symmetric) | histogram (L2-optimal range, "
                   "PyTorch's HistogramObserver) | percentile | mse (the last three for PTQ calibration)")
        ->check(CLI::IsMember({"moving_average", "minmax", "lsq", "tqt", "histogram", "percentile", "mse"}))
        ->capture_default_str();
    app.add_option("--percentile", percentile, "--observer percentile: the upper percentile kept, in (50, 100]")
        ->check(CLI::Range(50.000001, 100.0))
        ->capture_default_str();
    app.add_option("--scale-init", scale_init,
                   "--observer lsq/tqt: initial scale from the first batch: lsq (2·mean|x|/√Qp) | range (its min/max)")
        ->check(CLI::IsMember({"lsq", "range"}))
        ->capture_default_str();
    app.add_flag("--learn-zero-point", learn_zero_point, "--observer lsq --scheme affine: learn the zero point too (LSQ+)");
  }

  /// Writes the flags into `qc` (validate() then checks the combination).
  void apply_to(quant::QConfig& qc) const {
    qc.observer = quant::parse_observer(observer);
    qc.percentile = percentile;
    qc.scale_init = quant::parse_scale_init(scale_init);
    qc.learn_zero_point = learn_zero_point;
  }
};

/// The mapping the flags and --qconfig describe: `flags` for every layer without a file.
inline quant::QConfigMapping qconfig_mapping(const quant::QConfig& flags, const std::string& file) {
  flags.validate();
  return file.empty() ? quant::QConfigMapping(flags) : quant::QConfigMapping::from_file(file, flags);
}

}  // namespace qflow::tools
