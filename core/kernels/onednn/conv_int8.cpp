// Integer convolution on oneDNN. See Note [Integer convolution] in core/kernels/conv/quantized_conv.cpp.
#include "conv_int8.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kernels/common/kernel_utils.h"
#include "blocked_layout.h"
#include "onednn_context.h"
#include "qflow/core/versioned_cache.h"
#include "qflow/core/conv_ops.h"

namespace qflow::kernels::onednn {

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// oneDNN bakes per-channel output scales into the primitive (2.6 takes no runtime per-channel
// scales on x64), so a plan belongs to one layer: geometry, input type, zero points or not,
// post-ops, bias, output type and grid, and the scales themselves.
struct Int8Key {
  std::vector<int64_t> dims;  // geometry, input type, flags
  std::vector<float> scales;
  bool operator==(const Int8Key& o) const { return dims == o.dims && scales == o.scales; }
};

struct Int8KeyHash {
  size_t operator()(const Int8Key& k) const {
    size_t h = 0;
    for (int64_t d : k.dims) h = h * 1000003u ^ static_cast<size_t>(d);
    for (float s : k.scales) {
      uint32_t bits;
      std::memcpy(&bits, &s, sizeof bits);
      h = h * 1000003u ^ bits;
    }
    return h;
  }
};

struct Int8Plan {
  dnnl::convolution_forward prim;
  memory::desc x, w, y, scratch, add;
  memory::desc x_plain, w_plain, y_plain;
  std::shared_ptr<const BlockedLayout> y_layout;  // null when the primitive writes plain NCHW bytes
  std::optional<dnnl::reorder> x_from_plain;      // plain NCHW input → x, when they differ
  // The weights in the primitive's layout, and bias / output_scale (which oneDNN adds before
  // scaling), each until its source is written (Note [Versioned caches]).
  VersionedCache<Tensor> w_reordered;
  VersionedCache<Tensor> b_scaled;
};

struct Int8Cache {
  std::mutex mutex;
  std::unordered_map<Int8Key, std::unique_ptr<Int8Plan>, Int8KeyHash> plans;
};

Int8Cache& int8_cache() {
  static Int8Cache c;
  return c;
}

memory::dims x_dims(const ConvGeometry& g) { return {g.n, g.c, g.h, g.w}; }
// Grouped weights (O, C / G, kH, kW) are oneDNN's (G, O / G, C / G, kH, kW): the same bytes.
memory::dims w_dims(const ConvGeometry& g) {
  if (g.groups > 1) return {g.groups, g.og(), g.cg(), g.kh, g.kw};
  return {g.o, g.c, g.kh, g.kw};
}
tag w_plain_tag(const ConvGeometry& g) { return g.groups > 1 ? tag::goihw : tag::oihw; }
memory::dims y_dims(const ConvGeometry& g) { return {g.n, g.o, g.oh, g.ow}; }

// The integer range of an output type.
std::pair<int64_t, int64_t> range_of(DType dtype) {
  return dtype == DType::UInt8 ? std::pair<int64_t, int64_t>{0, 255} : std::pair<int64_t, int64_t>{-128, 127};
}

struct Int8Flags {
  dt src;
  bool zero_point, bias, relu, add;
  bool accumulate;  // sum post-op: y += the result, y the float32 destination (Note [Integer convolution])
  QuantizedOutput output;
};

// Whether two layouts of the same tensor place every element at the same byte: equal, or nhwc
// against nchw with one pixel per channel (a linear layer run as a 1×1 convolution).
bool same_bytes(const memory::desc& md, const memory::desc& plain) {
  if (md == plain) return true;
  const memory::dims d = md.dims();
  return d.size() == 4 && d[2] * d[3] == 1 && md == memory::desc(d, md.data_type(), tag::nhwc) &&
         plain == memory::desc(d, plain.data_type(), tag::nchw);
}

std::unique_ptr<Int8Plan> make_int8_plan(const ConvGeometry& g, const Int8Flags& f, const std::vector<float>& scales) {
  const memory::dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  const dt out = data_type_of(f.output.dtype);
  const memory::desc b = f.bias ? memory::desc({g.o}, dt::f32, tag::x) : memory::desc();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                    memory::desc(x_dims(g), f.src, tag::any), memory::desc(w_dims(g), dt::s8, tag::any),
                                    b, memory::desc(y_dims(g), out, tag::any), strides, dil, pad, pad);
  dnnl::primitive_attr attr = default_attr();
  attr.set_output_scales(scales.size() == 1 ? 0 : 1 << 1, scales);
  if (f.zero_point) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  // Post-ops run on the scaled result, before the output zero point is added: the residual,
  // the ReLU, then the grid's bounds where they are narrower than the type's.
  dnnl::post_ops ops;
  const memory::desc add = memory::desc(y_dims(g), dt::f32, tag::nhwc);
  if (f.add) ops.append_binary(dnnl::algorithm::binary_add, add);
  if (f.accumulate) ops.append_sum(1.0f);
  if (f.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  if (f.output.dtype != DType::Float32) {
    if (f.output.zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    if (range_of(f.output.dtype) != std::pair{f.output.min, f.output.max})
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(f.output.min - f.output.zero_point),
                         static_cast<float>(f.output.max - f.output.zero_point));
  }
  attr.set_post_ops(ops);
  dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
  auto plan = std::make_unique<Int8Plan>();
  plan->prim = dnnl::convolution_forward(pd);
  plan->x = pd.src_desc(), plan->w = pd.weights_desc(), plan->y = pd.dst_desc(), plan->scratch = pd.scratchpad_desc();
  plan->add = add;
  plan->x_plain = memory::desc(x_dims(g), f.src, tag::nchw);
  plan->w_plain = memory::desc(w_dims(g), dt::s8, w_plain_tag(g));
  plan->y_plain = memory::desc(y_dims(g), out, tag::nchw);
  if (!same_bytes(plan->y, plan->y_plain)) plan->y_layout = std::make_shared<BlockedLayout>(plan->y);
  // A plain input (the model's first layer, a linear layer's rows) is reordered on every call:
  // the reorder primitive is made once.
  if (!same_bytes(plan->x, plan->x_plain))
    plan->x_from_plain.emplace(dnnl::reorder::primitive_desc(engine(), plan->x_plain, engine(), plan->x));
  return plan;
}

void* raw(const Tensor& t) { return t.impl()->data(); }

// Tensor `t` as bytes in layout `md` (`plain`: md's plain NCHW form): t itself when it already
// is, else converted (counted when an opaque layout is involved) — with `from_plain` when given
// and t is plain.
Tensor in_layout(const Tensor& t, const memory::desc& md, const memory::desc& plain,
                 const std::optional<dnnl::reorder>& from_plain = std::nullopt) {
  const BlockedLayout* l = blocked_layout(t);
  if (l && l->desc() == md) return t;
  if (!l && same_bytes(md, plain)) return t.is_contiguous() ? t : t.contiguous();
  const memory::desc& from = l ? l->desc() : plain;
  const Tensor src_tensor = l || t.is_contiguous() ? t : t.contiguous();
  Tensor out = buffer_for(md);
  auto src = view(from, raw(src_tensor)), dst = view(md, raw(out));
  if (!l && from_plain) from_plain->execute(stream(), src, dst);
  else dnnl::reorder(src, dst).execute(stream(), src, dst);
  count_layout_conversion();
  return out;
}

// The weights in the plan's layout: reordered once per version of their storage (deployed
// weights never change). Call with the cache's lock held.
Tensor plan_weights(Int8Plan& plan, const Tensor& w) {
  return plan.w_reordered.get({&w}, [&] {
    Tensor copy = buffer_for(plan.w);
    auto s = view(plan.w_plain, raw(w)), d = view(plan.w, raw(copy));
    dnnl::reorder(s, d).execute(stream(), s, d);
    return copy;
  });
}

// The bias the plan's primitive takes: oneDNN adds it before scaling, y = scale * (sum + bias'),
// so bias' = bias / scale (the scales are the plan's own). Call with the cache's lock held.
Tensor plan_bias(Int8Plan& plan, const Tensor& bias, const std::vector<float>& output_scale) {
  if (!bias.defined()) return Tensor();
  return plan.b_scaled.get({&bias}, [&] {
    const int64_t o = bias.numel();
    Tensor scaled = new_tensor({o}, DType::Float32);
    const float* pb = bias.data_ptr<float>();
    float* ps = scaled.data_ptr<float>();
    for (int64_t i = 0; i < o; ++i) ps[i] = pb[i] / output_scale[output_scale.size() == 1 ? 0 : i];
    return scaled;
  });
}

}  // namespace

bool handles_int8(const ConvGeometry& g, const std::vector<float>& output_scale) {
  if (conv_engine() != ConvEngine::OneDNN || g.n == 0) return false;
  for (float s : output_scale)
    if (!(s > 0.0f) || !std::isfinite(s)) return false;
  return true;
}

namespace {

struct PlanUse {
  Int8Plan* plan;
  Tensor weights, bias;  // in the plan's layout and units
};

// The plan of `f` for this layer (made on first use), its weights and bias as it takes them.
PlanUse plan_for(const ConvGeometry& g, const Int8Flags& f, const Tensor& w, const Tensor& bias,
                 const std::vector<float>& output_scale) {
  const QuantizedOutput& output = f.output;
  Int8Key key{{g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.groups, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw,
               static_cast<int64_t>(f.src), f.zero_point, f.bias, f.relu, f.add, f.accumulate,
               static_cast<int64_t>(output.dtype), output.zero_point != 0, output.min - output.zero_point,
               output.max - output.zero_point},
              output_scale};
  auto& c = int8_cache();
  std::lock_guard lock(c.mutex);
  auto it = c.plans.find(key);
  if (it == c.plans.end()) it = c.plans.emplace(key, make_int8_plan(g, f, output_scale)).first;
  Int8Plan& plan = *it->second;
  return {&plan, plan_weights(plan, w), plan_bias(plan, bias, output_scale)};
}

// Runs `plan` writing `y` (the primitive's destination layout; read first when accumulating).
void execute(const Int8Plan& plan, const ConvGeometry& g, const Int8Flags& f, const Tensor& xs, int64_t zero_point,
             const PlanUse& use, const Tensor& add, const Tensor& y) {
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, view(plan.x, raw(xs))},
                                       {DNNL_ARG_WEIGHTS, view(plan.w, raw(use.weights))},
                                       {DNNL_ARG_DST, view(plan.y, raw(y))}};
  if (use.bias.defined()) args.emplace(DNNL_ARG_BIAS, view(memory::desc({g.o}, dt::f32, tag::x), raw(use.bias)));
  Tensor addend;
  if (f.add) {
    addend = in_layout(add, plan.add, memory::desc(y_dims(g), dt::f32, tag::nchw));
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, view(plan.add, raw(addend)));
  }
  int32_t zp = static_cast<int32_t>(zero_point), out_zp = static_cast<int32_t>(f.output.zero_point);
  if (f.zero_point) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, view(memory::desc({1}, dt::s32, tag::x), &zp));
  if (f.output.dtype != DType::Float32 && out_zp != 0)
    args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, view(memory::desc({1}, dt::s32, tag::x), &out_zp));
  args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad(plan.scratch));
  plan.prim.execute(stream(), args);
}

Int8Flags flags_of(const Tensor& x, int64_t zero_point, const Tensor& bias, bool relu) {
  return {x.dtype() == DType::UInt8 ? dt::u8 : dt::s8, zero_point != 0, bias.defined(), relu, false, false, {}};
}

}  // namespace

Tensor conv2d_int8(const ConvGeometry& g, const Tensor& x, int64_t zero_point, const Tensor& w,
                   const std::vector<float>& output_scale, const Tensor& bias, bool relu, const Tensor& add,
                   const QuantizedOutput& output) {
  Int8Flags f = flags_of(x, zero_point, bias, relu);
  f.add = add.defined();
  f.output = output;
  const PlanUse use = plan_for(g, f, w, bias, output_scale);
  Int8Plan* plan = use.plan;
  const Tensor xs = in_layout(x, plan->x, plan->x_plain, plan->x_from_plain);
  const bool keep_layout = plan->y_layout && conv_keeps_blocked_layout();
  Tensor y = keep_layout ? new_blocked_tensor(y_dims(g), plan->y_layout)
             : plan->y_layout ? buffer_for(plan->y)
                              : new_tensor({g.n, g.o, g.oh, g.ow}, output.dtype);
  execute(*plan, g, f, xs, zero_point, use, add, y);
  if (!plan->y_layout || keep_layout) return y;
  Tensor plain = new_tensor({g.n, g.o, g.oh, g.ow}, output.dtype);
  auto src = view(plan->y, raw(y)), dst = view(plan->y_plain, raw(plain));
  dnnl::reorder(src, dst).execute(stream(), src, dst);
  return plain;
}

bool conv2d_int8_accumulate(const ConvGeometry& g, const Tensor& x, int64_t zero_point, const Tensor& w,
                            const std::vector<float>& output_scale, const Tensor& bias, bool relu, Tensor& acc) {
  Int8Flags f = flags_of(x, zero_point, bias, relu);
  f.accumulate = true;
  const PlanUse use = plan_for(g, f, w, bias, output_scale);
  Int8Plan* plan = use.plan;
  // The sum post-op reads and writes the destination in the primitive's layout: only an
  // accumulator already in it (offset 0, its own bytes) is written in place.
  const BlockedLayout* l = blocked_layout(acc);
  const bool in_place = l ? l->desc() == plan->y && acc.impl()->offset() == 0
                          : same_bytes(plan->y, plan->y_plain) && acc.is_contiguous() && acc.impl()->offset() == 0;
  if (!in_place) return false;
  execute(*plan, g, f, in_layout(x, plan->x, plan->x_plain, plan->x_from_plain), zero_point, use, Tensor(), acc);
  return true;
}

}  // namespace qflow::kernels::onednn
