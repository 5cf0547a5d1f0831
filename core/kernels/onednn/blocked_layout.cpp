#include "blocked_layout.h"

namespace qflow::kernels::onednn {

using dnnl::memory;

namespace {

using tag = memory::format_tag;

memory::desc with_tag(const memory::desc& md, tag t) { return memory::desc(md.dims(), md.data_type(), t); }

}  // namespace

memory::data_type data_type_of(DType dtype) {
  switch (dtype) {
    case DType::Float32: return memory::data_type::f32;
    case DType::UInt8: return memory::data_type::u8;
    case DType::Int8: return memory::data_type::s8;
    case DType::Int32: return memory::data_type::s32;
    default: QFLOW_FAIL("oneDNN has no layout for {} tensors", dtype);
  }
}

BlockedLayout::BlockedLayout(const memory::desc& md) : md_(md) {
  const auto dims = md.dims();
  plain_ = with_tag(md, tag::abcd);
  if (dims.size() == 4 && md == with_tag(md, tag::nChw16c)) {
    block_ = 16, name_ = "nChw16c", tag_ = tag::nChw16c;
  } else if (dims.size() == 4 && md == with_tag(md, tag::nChw8c)) {
    block_ = 8, name_ = "nChw8c", tag_ = tag::nChw8c;
  } else if (dims.size() == 4 && md == with_tag(md, tag::nhwc)) {
    name_ = "nhwc", tag_ = tag::nhwc;
  } else {
    name_ = "onednn-blocked";
  }
}

DType BlockedLayout::dtype() const {
  switch (md_.data_type()) {
    case memory::data_type::u8: return DType::UInt8;
    case memory::data_type::s8: return DType::Int8;
    case memory::data_type::s32: return DType::Int32;
    default: return DType::Float32;
  }
}

std::shared_ptr<const OpaqueLayout> BlockedLayout::with_element_type(DType dtype) const {
  if (!tag_) return nullptr;
  std::lock_guard lock(retyped_mutex_);
  for (const auto& [type, layout] : retyped_)
    if (type == dtype) return layout;
  auto layout = std::make_shared<BlockedLayout>(memory::desc(md_.dims(), data_type_of(dtype), *tag_));
  retyped_.emplace_back(dtype, layout);
  return layout;
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
  auto impl =
      std::make_shared<TensorImpl>(std::move(storage), std::move(sizes), std::move(strides), 0, layout->dtype());
  impl->set_opaque_layout(std::move(layout));
  return Tensor(std::move(impl));
}

memory raw_view(const memory::desc& md, const Tensor& t) { return view(md, t.impl()->data()); }

}  // namespace qflow::kernels::onednn
