// Copies and conversions: to, to_device, clone, contiguous, copy_, fill_, zero_, detach, item.
#include "kernels/common/kernel_utils.h"
#include "qflow/core/device_runtime.h"
#include "kernels/common/loops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/ops.h"

namespace qflow {
namespace kernels {
namespace {

// dst (any layout, shape of src after broadcasting) = src converted to dst's dtype.
void copy_into(const Tensor& dst, const Tensor& src) {
  const auto src_strides = broadcast_strides(src, dst.sizes());
  const auto dst_strides = dst.strides();
  visit_dtype(dst.dtype(), [&](auto to_tag) {
    using TO = typename decltype(to_tag)::type;
    visit_dtype(src.dtype(), [&](auto from_tag) {
      using FROM = typename decltype(from_tag)::type;
      LoopPlan<2> plan = make_loop_plan<2>(dst.sizes(), {dst_strides, src_strides});
      for_each_row<TO, const FROM>(plan, {dst.data_ptr<TO>(), src.data_ptr<FROM>()},
                                   [](std::tuple<TO*, const FROM*> p, const std::array<int64_t, 2>& s, int64_t n) {
                                     auto [o, x] = p;
                                     if (s[0] == 1 && s[1] == 1) {
                                       for (int64_t i = 0; i < n; ++i) o[i] = static_cast<TO>(x[i]);
                                     } else {
                                       for (int64_t i = 0; i < n; ++i) o[i * s[0]] = static_cast<TO>(x[i * s[1]]);
                                     }
                                   });
    });
  });
}

std::vector<TensorMeta> same_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), a.tensor("self").dtype()); }

Stack to_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  Tensor y = new_tensor(x.sizes(), a.dtype("dtype"));
  copy_into(y, x);
  return out(y);
}

Stack clone_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  Tensor y = new_tensor(x.sizes(), x.dtype());
  copy_into(y, x);
  return out(y);
}

Stack contiguous_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  if (x.is_contiguous()) return out(x);
  return clone_kernel(a);
}

Stack copy__kernel(OpArgs& a) {
  Tensor& self = a.tensor("self");
  if (a.tensor("src").device() != self.device()) a.tensor("src") = to_device(a.tensor("src"), self.device());
  const Tensor& src = a.tensor("src");
  const auto shape = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  QFLOW_CHECK(shape == self.sizes(), "copy_: source of shape {} cannot be broadcast to destination shape {}", src.sizes(),
              self.sizes());
  // Reading and writing the same memory through different strides would be order-dependent.
  Tensor source = (src.impl()->storage() == self.impl()->storage() && !src.is_same(self)) ? src.clone() : src;
  copy_into(self, source);
  self.impl()->storage()->bump_version();
  return out(self);
}

Stack fill_with(Tensor& self, const Scalar& v) {
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T value = v.to<T>();
    // Write-only: the destination is often fresh memory (full, zeros), and loading an
    // uninitialised byte as a bool is undefined behaviour (UBSan, tools/run-tests --sanitize).
    LoopPlan<1> plan = make_loop_plan<1>(self.sizes(), {self.strides()});
    for_each_row<T>(plan, {self.data_ptr<T>()}, [value](std::tuple<T*> p, const std::array<int64_t, 1>& s, int64_t n) {
      T* o = std::get<0>(p);
      if (s[0] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = value;
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * s[0]] = value;
      }
    });
  });
  self.impl()->storage()->bump_version();
  return out(self);
}

Stack fill__kernel(OpArgs& a) { return fill_with(a.tensor("self"), a.scalar("value")); }
Stack zero__kernel(OpArgs& a) { return fill_with(a.tensor("self"), Scalar(0)); }

Stack detach_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  auto impl = std::make_shared<TensorImpl>(x.impl()->storage(), x.sizes(), x.strides(), x.storage_offset(), x.dtype());
  return out(Tensor(std::move(impl)));
}

std::vector<TensorMeta> to_meta(const OpArgs& a) { return one(a.tensor("self").sizes(), a.dtype("dtype")); }
std::vector<TensorMeta> no_tensor_meta(const OpArgs&) { return {}; }

Stack item_kernel(OpArgs& a) {
  const Tensor x = a.tensor("self").device().is_cpu() ? a.tensor("self") : to_device(a.tensor("self"), Device::cpu());
  QFLOW_CHECK(x.numel() == 1, "item: expected a tensor with one element, got shape {} ({} elements)", x.sizes(), x.numel());
  return visit_dtype(x.dtype(), [&](auto tag) -> Stack {
    using T = typename decltype(tag)::type;
    return Stack{Value(Scalar(*static_cast<const T*>(x.raw_data())))};
  });
}

// Device copies go through the DeviceRuntime of the device that is not the CPU (Note [Devices]).
Stack to_device_kernel(OpArgs& a) {
  const Tensor& x = a.tensor("self");
  const Device target = Device::parse(a.string("device"));
  if (target == x.device()) return out(x);
  // A plain, dense source: one copy of nbytes. (A CPU tensor in an opaque layout becomes plain
  // here; a device tensor is made contiguous by its device's kernel.)
  const Tensor src = x.contiguous();
  const void* src_data = src.device().is_cpu() ? src.raw_data() : src.impl()->data();
  auto storage = Storage::allocate(src.nbytes(), target);
  DeviceRuntime& runtime = device_runtime(target.is_cpu() ? src.device() : target);
  if (src.nbytes() > 0) runtime.copy(storage->data(), target, src_data, src.device(), src.nbytes());
  return out(Tensor(std::make_shared<TensorImpl>(std::move(storage), src.sizes(), contiguous_strides(src.sizes()), 0,
                                                 src.dtype())));
}

std::vector<TensorMeta> to_device_meta(const OpArgs& a) {
  return {TensorMeta{a.tensor("self").sizes(), a.tensor("self").dtype(), Device::parse(a.string("device"))}};
}

}  // namespace

void copy_tensor(const Tensor& dst, const Tensor& src) { copy_into(dst, src); }

}  // namespace kernels

// ---- typed API --------------------------------------------------------------------------------
Tensor to_device(const Tensor& x, Device device) {
  static const OpHandle op("to_device");
  if (x.device() == device) return x;
  return call_tensor(op, {{"self", x}, {"device", device.str()}});
}
Tensor Tensor::to(Device device) const { return to_device(*this, device); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  static const OpHandle op("to");
  return call_tensor(op, {{"self", x}, {"dtype", dtype}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/copy.toml (Note [One declaration per op]).
#include "core/ops/copy.inc"
