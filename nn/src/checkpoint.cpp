// Training checkpoints. See Note [Training checkpoints].
#include "qflow/nn/checkpoint.h"

#include <bit>
#include <string_view>

#include "qflow/core/factory.h"
#include "qflow/core/generator.h"

namespace qflow::nn {

namespace {

constexpr const char* kFormat = "qflow.training_checkpoint";
constexpr const char* kFormatVersion = "1";

constexpr std::string_view kModel = "model.";
constexpr std::string_view kOptimizer = "optimizer.";
constexpr std::string_view kScheduler = "scheduler.";

Tensor int64_scalar(int64_t v) { return scalar_tensor(v, DType::Int64); }

void add_prefixed(StateDict& out, std::string_view prefix, const optim::NamedTensors& entries) {
  for (const auto& [key, t] : entries) out.insert(std::string(prefix) + key, t);
}

// The file's entries sorted by owner; anything outside the known prefixes is an error.
struct Parts {
  StateDict model;
  optim::NamedTensors optimizer, scheduler;
  int64_t epoch = 0, step = 0;
  uint64_t rng_seed = 0, rng_offset = 0;
};

int64_t read_scalar(const StateDict& dict, const std::string& key, const std::string& path) {
  const Tensor* t = dict.find(key);
  QFLOW_CHECK(t != nullptr, "load_training_checkpoint: '{}' has no entry '{}'", path, key);
  QFLOW_CHECK(t->dtype() == DType::Int64 && t->numel() == 1,
              "load_training_checkpoint: '{}': entry '{}' must be one int64, got dtype {} and shape {}", path, key,
              t->dtype(), t->sizes());
  return t->item<int64_t>();
}

Parts split(const StateDict& dict, const CheckpointMetadata& metadata, const std::string& path) {
  const auto format = metadata.find("format");
  QFLOW_CHECK(format != metadata.end() && format->second == kFormat,
              "load_training_checkpoint: '{}' is not a qflow training checkpoint (metadata 'format' is '{}', expected "
              "'{}'); plain model files load with nn::load and Module::load_state_dict",
              path, format == metadata.end() ? "" : format->second, kFormat);
  const auto version = metadata.find("format_version");
  QFLOW_CHECK(version != metadata.end() && version->second == kFormatVersion,
              "load_training_checkpoint: '{}' has format_version '{}', this build reads version {}", path,
              version == metadata.end() ? "" : version->second, kFormatVersion);
  Parts parts;
  for (const auto& [key, t] : dict) {
    const std::string_view k = key;
    if (k.starts_with(kModel)) {
      parts.model.insert(key.substr(kModel.size()), t);
    } else if (k.starts_with(kOptimizer)) {
      parts.optimizer.emplace_back(key.substr(kOptimizer.size()), t);
    } else if (k.starts_with(kScheduler)) {
      parts.scheduler.emplace_back(key.substr(kScheduler.size()), t);
    } else {
      QFLOW_CHECK(k == "progress.epoch" || k == "progress.step" || k == "rng.seed" || k == "rng.offset",
                  "load_training_checkpoint: '{}' has an unexpected entry '{}'", path, key);
    }
  }
  parts.epoch = read_scalar(dict, "progress.epoch", path);
  parts.step = read_scalar(dict, "progress.step", path);
  parts.rng_seed = std::bit_cast<uint64_t>(read_scalar(dict, "rng.seed", path));
  parts.rng_offset = std::bit_cast<uint64_t>(read_scalar(dict, "rng.offset", path));
  return parts;
}

// Re-throws `e` with the file named, so every failure of a load says which checkpoint it was.
[[noreturn]] void fail_in(const std::string& path, const char* part, const Error& e) {
  QFLOW_FAIL("load_training_checkpoint: '{}': the {} state does not fit: {}", path, part, e.message());
}

}  // namespace

void save_training_checkpoint(const std::string& path, const Module& model, const optim::Optimizer& optimizer,
                              const optim::LRScheduler* scheduler, TrainingProgress progress,
                              const CheckpointMetadata& metadata) {
  QFLOW_CHECK(!metadata.contains("format") && !metadata.contains("format_version"),
              "save_training_checkpoint: metadata keys 'format' and 'format_version' are reserved");
  StateDict out;
  for (const auto& [key, t] : model.state_dict()) out.insert(std::string(kModel) + key, t);
  add_prefixed(out, kOptimizer, optimizer.state_dict());
  if (scheduler != nullptr) add_prefixed(out, kScheduler, scheduler->state_dict());
  out.insert("progress.epoch", int64_scalar(progress.epoch));
  out.insert("progress.step", int64_scalar(progress.step));
  const Generator& gen = default_generator();
  out.insert("rng.seed", int64_scalar(std::bit_cast<int64_t>(gen.seed())));
  out.insert("rng.offset", int64_scalar(std::bit_cast<int64_t>(gen.offset())));
  CheckpointMetadata meta = metadata;
  meta.emplace("format", kFormat);  // absent: checked above
  meta.emplace("format_version", kFormatVersion);
  save(out, path, meta);
}

TrainingProgress load_training_checkpoint(const std::string& path, Module& model, optim::Optimizer& optimizer,
                                          optim::LRScheduler* scheduler, CheckpointMetadata* metadata) {
  CheckpointMetadata meta;
  const StateDict dict = load(path, &meta);  // validates the whole file before we touch anything
  const Parts parts = split(dict, meta, path);
  QFLOW_CHECK(scheduler != nullptr || parts.scheduler.empty(),
              "load_training_checkpoint: '{}' holds a learning-rate schedule but no scheduler was given", path);
  QFLOW_CHECK(scheduler == nullptr || !parts.scheduler.empty(),
              "load_training_checkpoint: '{}' holds no learning-rate schedule but a scheduler was given", path);

  // Each load_state_dict validates before it changes anything; what was already restored is
  // rolled back when a later part refuses, so a failed load changes nothing. The model goes
  // last because its load is all-or-nothing by itself.
  const optim::NamedTensors optimizer_backup = optimizer.state_dict();
  const optim::NamedTensors scheduler_backup = scheduler ? scheduler->state_dict() : optim::NamedTensors{};
  bool optimizer_loaded = false, scheduler_loaded = false;
  auto roll_back = [&] {
    if (scheduler_loaded) scheduler->load_state_dict(scheduler_backup);
    if (optimizer_loaded) optimizer.load_state_dict(optimizer_backup);  // after the scheduler: it sets lrs
  };
  const char* part = "optimizer";
  try {
    optimizer.load_state_dict(parts.optimizer);
    optimizer_loaded = true;
    if (scheduler != nullptr) {
      part = "scheduler";
      scheduler->load_state_dict(parts.scheduler);
      scheduler_loaded = true;
    }
    part = "model";
    model.load_state_dict(parts.model, /*strict=*/true);
  } catch (const Error& e) {
    roll_back();
    fail_in(path, part, e);
  } catch (...) {
    roll_back();
    throw;
  }
  default_generator().set_state(parts.rng_seed, parts.rng_offset);
  if (metadata != nullptr) *metadata = std::move(meta);
  return {.epoch = parts.epoch, .step = parts.step};
}

}  // namespace qflow::nn
