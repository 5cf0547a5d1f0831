// The CUDA kernel of sgd_update_ (core/kernels/nn/optim.cpp).
//
// Note [Fused optimizer step]
// SGD with momentum and weight decay is four element-wise ops per parameter: ResNet18's 62
// parameters make ~250 launches a step, each a few microseconds of host work, against a whole
// step of ~6 ms on an H100 (issue 33). sgd_update_ gets all of a group's parameters at once;
// here they are cut into chunks of kSgdChunk elements, the chunk table goes to the device in one
// copy, and one launch updates everything (PyTorch's "foreach"/multi-tensor apply). Tensors that
// are not contiguous float32 (never the case for qflow's layers) take the CPU kernel, a
// sequence of ops that runs on any device.
#include <cstring>
#include <vector>

#include "kernels/optim.cuh"
#include "src/cuda_ops.h"
#include "src/pinned_allocator.h"
#include "qflow/core/ops.h"

namespace qflow::cuda {
namespace {

bool fusable(const Tensor& t) { return t.defined() && t.dtype() == DType::Float32 && t.is_contiguous(); }

Stack sgd_update_cuda(OpArgs& a) {
  const TensorList& params = a.tensor_list("params");
  const TensorList& grads = a.tensor_list("grads");
  const TensorList& buffers = a.tensor_list("momentum_buffers");
  OpRegistry::instance().get("sgd_update_").shape(a);  // the CPU op's checks and messages
  const SgdHyper h{static_cast<float>(a.to_double("lr")), static_cast<float>(a.to_double("momentum")),
                   static_cast<float>(a.to_double("dampening")), static_cast<float>(a.to_double("weight_decay")),
                   a.to_bool("nesterov"), a.to_bool("first_step")};
  const bool with_buffers = h.momentum != 0.0f;
  std::vector<SgdChunk> chunks;
  TensorList rest_params, rest_grads, rest_buffers;  // not dense float32: the per-parameter ops
  for (size_t i = 0; i < params.size(); ++i) {
    const bool fused = fusable(params[i]) && fusable(grads[i]) && (!with_buffers || fusable(buffers[i]));
    if (!fused) {
      rest_params.push_back(params[i]);
      rest_grads.push_back(grads[i]);
      if (with_buffers) rest_buffers.push_back(buffers[i]);
      continue;
    }
    float* p = static_cast<float*>(params[i].impl()->data());
    const float* g = static_cast<const float*>(grads[i].impl()->data());
    float* b = with_buffers ? static_cast<float*>(buffers[i].impl()->data()) : nullptr;
    for (int64_t start = 0; start < params[i].numel(); start += kSgdChunk)
      chunks.push_back({p + start, g + start, b ? b + start : nullptr, std::min(kSgdChunk, params[i].numel() - start)});
    params[i].impl()->storage()->bump_version();  // cached forms of the weight (conv) go stale
    if (with_buffers) buffers[i].impl()->storage()->bump_version();
  }
  if (!rest_params.empty()) {
    // The CPU kernel is the per-parameter sequence of ops, which run here on the GPU.
    Stack rest = a.stack();
    rest[0] = Value(rest_params);
    rest[1] = Value(rest_grads);
    rest[2] = Value(rest_buffers);
    const OpDef& op = OpRegistry::instance().get("sgd_update_");
    OpArgs view(op.schema, rest);
    op.kernel(view);
  }
  if (chunks.empty()) return {};
  Launch launch(params.front());
  const size_t table_bytes = chunks.size() * sizeof(SgdChunk);
  auto table = workspace(table_bytes, params.front().device());
  // Staged in page-locked memory: a DMA copy that never waits on the host, and whose block is
  // reused only after the copy ran (Note [Pinned batches]).
  void* staging = PinnedAllocator::instance().allocate(table_bytes);
  std::memcpy(staging, chunks.data(), table_bytes);
  const cudaError_t copied = cudaMemcpyAsync(table->data(), staging, table_bytes, cudaMemcpyHostToDevice, launch.stream);
  PinnedAllocator::instance().free(staging, table_bytes);
  QFLOW_CUDA_CHECK(copied, "sgd_update_");
  launch_sgd_update(static_cast<const SgdChunk*>(table->data()), static_cast<int64_t>(chunks.size()), h, launch.stream);
  QFLOW_CUDA_CHECK_LAUNCH("sgd_update_");
  return {};
}

}  // namespace
}  // namespace qflow::cuda

#include "cuda/kernels/optim_ops.cuda.inc"
