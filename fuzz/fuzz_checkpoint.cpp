// libFuzzer target: a training checkpoint (safetensors with qflow's metadata and keys) ->
// nn::load_training_checkpoint, as qflow-train --resume restores one, then the training step
// that follows a resume. See Note [Fuzzing the readers].
//
// Properties checked besides "no crash": a load that fails changes nothing (model, optimizer,
// schedule and RNG state are as before: the all-or-nothing promise of Note [Training
// checkpoints]), and a checkpoint that loads can be trained on: the next step throws nothing.
#include <cstring>
#include <map>

#include "checkpoint_nets.h"
#include "fuzz_util.h"
#include "qflow/core/generator.h"
#include "qflow/nn/checkpoint.h"

using namespace qflow;

namespace {

// Every tensor's dtype, shape and bytes, plus the learning rates and the RNG state.
struct Snapshot {
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::vector<double> lrs;
  uint64_t seed = 0, offset = 0;
  bool operator==(const Snapshot&) const = default;
};

void add(Snapshot& s, const std::string& key, const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> b(c.nbytes() + 1 + 8 * c.sizes().size());
  b[0] = static_cast<uint8_t>(c.dtype());
  if (!c.sizes().empty()) std::memcpy(b.data() + 1, c.sizes().data(), 8 * c.sizes().size());
  if (c.nbytes() > 0) std::memcpy(b.data() + 1 + 8 * c.sizes().size(), c.raw_data(), c.nbytes());
  s.bytes[key] = std::move(b);
}

Snapshot snapshot(const fuzz::TrainingSetup& t) {
  Snapshot s;
  for (const auto& [k, v] : t.net->state_dict()) add(s, "model." + k, v);
  for (const auto& [k, v] : t.opt->state_dict()) add(s, "optimizer." + k, v);
  for (const auto& [k, v] : t.sched->state_dict()) add(s, "scheduler." + k, v);
  s.lrs = t.sched->last_lr();
  s.seed = default_generator().seed();
  s.offset = default_generator().offset();
  return s;
}

void restore_into(fuzz::TrainingSetup& setup, const std::string& path) {
  const Snapshot before = snapshot(setup);
  nn::CheckpointMetadata meta;
  if (!fuzz::accepts([&] { nn::load_training_checkpoint(path, *setup.net, *setup.opt, setup.sched.get(), &meta); })) {
    fuzz::require(snapshot(setup) == before, "a failed load_training_checkpoint changes nothing");
    return;
  }
  setup.net->train();
  try {
    setup.train_step();
  } catch (const Error& e) {
    std::fprintf(stderr, "training after a successful load threw: %s\n", e.what());
    fuzz::require(false, "a checkpoint that loads can be trained on");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file("fuzz.safetensors");
  // Built once: a restored state simply stays for the next input, as after a real resume.
  static fuzz::TrainingSetup sgd(/*adam=*/false), adam(/*adam=*/true);
  file.write(data, size);
  restore_into(sgd, file.path());
  restore_into(adam, file.path());
  return 0;
}
