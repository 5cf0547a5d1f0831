#include "onednn_context.h"

#include "kernels/common/kernel_utils.h"

namespace qflow::kernels::onednn {

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

Tensor buffer_for(const dnnl::memory::desc& md) {
  // Float32 elements covering the descriptor's bytes (blocked layouts pad channels).
  const auto bytes = static_cast<int64_t>(md.get_size());
  return new_tensor({(bytes + 3) / 4}, DType::Float32);
}

dnnl::memory view(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, engine(), const_cast<void*>(data));
}

dnnl::memory scratchpad(const dnnl::memory::desc& md) {
  thread_local Tensor buffer;
  const auto bytes = static_cast<int64_t>(md.get_size());
  if (!buffer.defined() || buffer.numel() * 4 < bytes) buffer = new_tensor({(bytes + 3) / 4 + 1}, DType::Float32);
  return view(md, buffer.data_ptr<float>());
}

dnnl::primitive_attr default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory::desc plain_nchw(const dnnl::memory::dims& dims) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abcd);
}

}  // namespace qflow::kernels::onednn
