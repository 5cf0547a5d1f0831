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

/// The mapping the flags and --qconfig describe: `flags` for every layer without a file.
inline quant::QConfigMapping qconfig_mapping(const quant::QConfig& flags, const std::string& file) {
  flags.validate();
  return file.empty() ? quant::QConfigMapping(flags) : quant::QConfigMapping::from_file(file, flags);
}

}  // namespace qflow::tools
