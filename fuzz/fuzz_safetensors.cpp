// libFuzzer target: safetensors bytes -> nn::from_safetensors_bytes (every checkpoint and
// weights file qflow reads goes through it). See Note [Fuzzing the readers].
#include <cstring>
#include <span>

#include "fuzz_util.h"
#include "qflow/nn/serialize.h"

using namespace qflow;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nn::StateDict dict;
  nn::CheckpointMetadata meta;
  if (!fuzz::accepts([&] { dict = nn::from_safetensors_bytes({data, size}, "fuzz.safetensors", &meta); })) return 0;

  // A file that loads saves and loads again to the same tensors and metadata.
  const std::vector<uint8_t> again = nn::to_safetensors_bytes(dict, meta);
  nn::CheckpointMetadata meta2;
  const nn::StateDict dict2 = nn::from_safetensors_bytes(again, "resaved.safetensors", &meta2);
  fuzz::require(meta2 == meta, "metadata survives a save/load round trip");
  fuzz::require(dict2.size() == dict.size(), "every tensor survives a save/load round trip");
  for (const auto& [name, t] : dict) {
    const Tensor* u = dict2.find(name);
    fuzz::require(u != nullptr && u->dtype() == t.dtype() && u->sizes() == t.sizes(), "tensor kept its dtype and shape");
    fuzz::require((t.is_contiguous() || t.numel() == 0) && t.nbytes() == u->nbytes(), "tensor is dense, same byte count");
    fuzz::require(t.nbytes() == 0 || std::memcmp(t.raw_data(), u->raw_data(), t.nbytes()) == 0, "tensor kept its bytes");
  }
  return 0;
}
