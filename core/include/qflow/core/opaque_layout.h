#pragma once
// Tensors whose elements live in a layout strides cannot describe. See Note [Opaque layouts].
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "qflow/core/dispatch_key.h"
#include "qflow/core/dtype.h"

namespace qflow {

/// Note [Opaque layouts]
/// oneDNN's convolutions run fastest, and its Winograd kernels only run, on blocked activation
/// layouts such as nChw16c: channels in blocks of 16 innermost, (N, C/16, H, W, 16). Strides
/// cannot describe that, so such a tensor carries an OpaqueLayout: it keeps its logical sizes
/// (N, C, H, W) and row-major strides, reports is_contiguous() == false, its storage holds the
/// layout's bytes (channels padded to the block, the padding zero), and it carries
/// kOpaqueLayoutKey.
///
/// The blocked layout is a kernel key, like a device (Note [Kernels per device]): ops with a
/// blocked kernel (OpRegistry::impl_blocked: convolution, batch norm, ReLU and its backward,
/// add, ...) take such tensors as they are and keep the layout from one layer to the next
/// through a training step. For every other op the opaque-layout dispatch layer, the last
/// before the kernel, converts them to plain first — in place (TensorImpl::make_plain),
/// so views, in-place ops and autograd's saved tensors all see the same values, and no kernel
/// ever reads blocked bytes through strides. Code that reads elements directly (data_ptr,
/// to_vector, printing, saving) converts the same way. layout_conversion_count() counts the
/// conversions both ways, so a test can check that a ResNet18 step converts only at the
/// model's input and at its classifier.
class OpaqueLayout {
 public:
  virtual ~OpaqueLayout() = default;
  /// Short name for messages, e.g. "nChw16c".
  virtual std::string name() const = 0;
  /// Bytes of storage a tensor in this layout needs.
  virtual size_t nbytes() const = 0;
  /// Channels per block when the layout is (N, ceil(C / b), H, W, b) with zero padding
  /// (b = 8 or 16), else 0. Core's per-channel kernels (batch norm) run on such layouts.
  virtual int64_t channel_block() const = 0;
  /// True when tensors in `other` lay out their bytes exactly like tensors in this layout
  /// (element-wise ops may then combine the two storages directly).
  virtual bool same_as(const OpaqueLayout& other) const = 0;
  /// Writes the elements at `src` (this layout) to `dst` as a plain row-major tensor.
  virtual void to_plain(const void* src, void* dst) const = 0;
  /// The inverse: a plain row-major tensor at `src` into this layout at `dst` (padding zeroed).
  virtual void from_plain(const void* src, void* dst) const = 0;
  /// The same arrangement of elements holding `dtype` instead (the uint8 activations quantize
  /// makes of float32 ones, Note [Integer activations]), or null when the layout has no such form.
  virtual std::shared_ptr<const OpaqueLayout> with_element_type(DType dtype) const = 0;
};

// The dispatch layer that converts opaque tensors runs under kOpaqueLayoutKey (dispatch_key.h).

/// Conversions between opaque and plain layouts since start-up (or the last reset), counted by
/// make_plain and by the kernels that bring a plain tensor into an opaque layout.
int64_t layout_conversion_count();
void reset_layout_conversion_count();
/// Called by kernels when they convert a plain tensor into an opaque layout.
void count_layout_conversion();

}  // namespace qflow
