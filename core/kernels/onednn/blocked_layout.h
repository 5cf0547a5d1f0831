#pragma once
// oneDNN memory layouts as opaque tensor layouts (see Note [Opaque layouts]).
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onednn_context.h"
#include "qflow/core/opaque_layout.h"

namespace qflow::kernels::onednn {

/// An activation in the layout a oneDNN primitive chose: float32 nChw16c for the float
/// convolutions on AVX-512, uint8/int8/float32 nhwc for the integer ones.
class BlockedLayout final : public OpaqueLayout {
 public:
  explicit BlockedLayout(const dnnl::memory::desc& md);
  /// The tensor element type of md's data type.
  DType dtype() const;
  const dnnl::memory::desc& desc() const { return md_; }
  std::string name() const override { return name_; }
  size_t nbytes() const override { return md_.get_size(); }
  int64_t channel_block() const override { return block_; }
  bool same_as(const OpaqueLayout& other) const override;
  void to_plain(const void* src, void* dst) const override;
  void from_plain(const void* src, void* dst) const override;
  /// nhwc, nChw16c and nChw8c layouts of another element type; null for other formats.
  std::shared_ptr<const OpaqueLayout> with_element_type(DType dtype) const override;

 private:
  void reorder(bool to_plain, const void* src, void* dst) const;

  dnnl::memory::desc md_, plain_;
  std::optional<dnnl::memory::format_tag> tag_;  // when md_ is one of the named formats
  int64_t block_ = 0;
  std::string name_;
  mutable std::once_flag reorders_once_;
  // with_element_type's layouts, made once per element type (integer layers ask on every call).
  mutable std::mutex retyped_mutex_;
  mutable std::vector<std::pair<DType, std::shared_ptr<const OpaqueLayout>>> retyped_;
  mutable std::optional<dnnl::reorder> to_plain_, from_plain_;
};

/// The layout of `t` when it is a oneDNN blocked tensor, else null.
const BlockedLayout* blocked_layout(const Tensor& t);
/// The oneDNN data type of a tensor element type (float32, uint8, int8, int32); throws for others.
dnnl::memory::data_type data_type_of(DType dtype);
/// A new tensor of logical sizes `dims` and the layout's element type whose storage holds
/// `layout` (uninitialised).
Tensor new_blocked_tensor(const dnnl::memory::dims& dims, std::shared_ptr<const BlockedLayout> layout);
/// The raw bytes of any tensor as oneDNN memory of layout `md` (no copy, no conversion).
dnnl::memory raw_view(const dnnl::memory::desc& md, const Tensor& t);

}  // namespace qflow::kernels::onednn
