#include "blocked_layout.h"

namespace qflow::kernels::onednn {

using dnnl::memory;

namespace {

memory::desc with_tag(const memory::desc& md, memory::format_tag tag) {
  return memory::desc(md.dims(), memory::data_type::f32, tag);
}

}  // namespace

BlockedLayout::BlockedLayout(const memory::desc& md) : md_(md) {
  const auto dims = md.dims();
  plain_ = memory::desc(dims, memory::data_type::f32, memory::format_tag::abcd);
  if (dims.size() == 4 && md == with_tag(md, memory::format_tag::nChw16c)) {
    block_ = 16, name_ = "nChw16c";
  } else if (dims.size() == 4 && md == with_tag(md, memory::format_tag::nChw8c)) {
    block_ = 8, name_ = "nChw8c";
  } else if (dims.size() == 4 && md == with_tag(md, memory::format_tag::nhwc)) {
    name_ = "nhwc";
  } else {
    name_ = "onednn-blocked";
  }
}

bool BlockedLayout::same_as(const OpaqueLayout& other) const {
  const auto* o = dynamic_cast<const BlockedLayout*>(&other);
  return o && (o == this || o->md_ == md_);
}

void BlockedLayout::reorder(bool to_plain, const void* src, void* dst) const {
  std::call_once(reorders_once_, [&] {  // built on first use: most layouts are never converted
    to_plain_.emplace(dnnl::reorder::primitive_desc(engine(), md_, engine(), plain_));
    from_plain_.emplace(dnnl::reorder::primitive_desc(engine(), plain_, engine(), md_));
  });
  auto s = view(to_plain ? md_ : plain_, src), d = view(to_plain ? plain_ : md_, dst);
  (to_plain ? *to_plain_ : *from_plain_).execute(stream(), {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, d}});
}

void BlockedLayout::to_plain(const void* src, void* dst) const { reorder(true, src, dst); }
void BlockedLayout::from_plain(const void* src, void* dst) const { reorder(false, src, dst); }

const BlockedLayout* blocked_layout(const Tensor& t) {
  return t.defined() ? dynamic_cast<const BlockedLayout*>(t.impl()->opaque_layout()) : nullptr;
}

Tensor new_blocked_tensor(const memory::dims& dims, std::shared_ptr<const BlockedLayout> layout) {
  auto storage = Storage::allocate(layout->nbytes());
  std::vector<int64_t> sizes(dims.begin(), dims.end());
  auto strides = contiguous_strides(sizes);
  auto impl = std::make_shared<TensorImpl>(std::move(storage), std::move(sizes), std::move(strides), 0, DType::Float32);
  impl->set_opaque_layout(std::move(layout));
  return Tensor(std::move(impl));
}

memory raw_view(const memory::desc& md, const Tensor& t) { return view(md, t.impl()->data()); }

}  // namespace qflow::kernels::onednn
