// Seeds for the nn layer's fuzz targets: safetensors files from nn::to_safetensors_bytes (the
// writer the tests check byte for byte against Python's) and training checkpoints from
// nn::save_training_checkpoint on the setups the checkpoint target restores into.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../checkpoint_nets.h"
#include "qflow/core/factory.h"
#include "qflow/core/generator.h"
#include "qflow/nn/checkpoint.h"
#include "qflow/nn/serialize.h"
#include "seeds.h"

namespace qflow::fuzz {

namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> checkpoint_of(bool adam, int steps) {
  manual_seed(7);
  TrainingSetup setup(adam);
  for (int s = 0; s < steps; ++s) setup.train_step();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("qflow-fuzz-seed-" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  nn::save_training_checkpoint(path, *setup.net, *setup.opt, setup.sched.get(), {.epoch = steps, .step = 10 * steps},
                               {{"quant", "none"}, {"command", "qflow-train --model lenet5"}});
  std::vector<uint8_t> bytes = file_bytes(path);
  std::filesystem::remove(path);
  return bytes;
}

}  // namespace

Seeds safetensors_seeds() {
  nn::StateDict all;
  all.insert("f32", from_vector<float>({0, 1.5f, -2, 3}, {2, 2}));
  all.insert("f64", from_vector<double>({1e-300, 2}, {2}));
  all.insert("i64", from_vector<int64_t>({-1, 1LL << 40}, {1, 2}));
  all.insert("i32", scalar_tensor(7, DType::Int32));
  all.insert("i8", from_vector<int8_t>({-128, 127, 0}, {3, 1}));
  all.insert("u8", from_vector<uint8_t>({255, 0}, {2}));
  all.insert("bool", from_vector<bool>({true, false, true}, {3}));
  all.insert("empty", zeros({0, 3}, DType::Float32));
  nn::StateDict layer;
  layer.insert("layer1.0.conv1.weight", arange(0, 24, 1, DType::Float32).view({2, 3, 2, 2}));
  layer.insert("layer1.0.bn1.num_batches_tracked", scalar_tensor(int64_t{3}, DType::Int64));
  return {{"all-dtypes.safetensors", nn::to_safetensors_bytes(all, {{"format", "pt"}, {"note", "seed"}})},
          {"layer.safetensors", nn::to_safetensors_bytes(layer)},
          {"empty.safetensors", nn::to_safetensors_bytes({})},
          {"metadata-only.safetensors", nn::to_safetensors_bytes({}, {{"framework", "pt"}})}};
}

Seeds checkpoint_seeds() {
  return {{"sgd-step0.safetensors", checkpoint_of(false, 0)},
          {"sgd-step2.safetensors", checkpoint_of(false, 2)},
          {"adam-step2.safetensors", checkpoint_of(true, 2)}};
}

}  // namespace qflow::fuzz
