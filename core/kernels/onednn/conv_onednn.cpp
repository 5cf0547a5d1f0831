// float32 convolution through oneDNN. See Note [oneDNN convolution].
#include "conv_onednn.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kernels/common/kernel_utils.h"
#include "blocked_layout.h"
#include "onednn_context.h"
#include "qflow/core/conv_ops.h"

namespace qflow::kernels::onednn {

/// Note [oneDNN convolution]
/// float32 convolutions run on oneDNN, whose direct kernels reach ~97 % of the FMA peak and
/// whose Winograd F(4x4, 3x3) kernels do 2.2-2.6x the work per second of the direct ones on
/// ResNet18's 3x3 stride-1 layers (measured, docs/performance.md). Each call:
///  - looks up a plan by (geometry, pass, algorithm, bias): the primitive descriptor, the
///    primitive and the reorders between qflow's plain NCHW/OIHW and the layouts the
///    primitive chose (`format_tag::any`: nChw16c activations on AVX-512). Creating a
///    descriptor costs 0.1-1 ms, so plans live for the process (clear_conv_cache frees them);
///  - reorders the weights into the primitive's layout once per weight *version*: a second
///    call with the same storage, offset and version counter (Note [Version counter]) reuses
///    the reordered buffer, so inference and the backward pass of a step reorder nothing;
///  - runs with the thread's one scratchpad (Note [One scratchpad]).
/// The algorithm: conv_algorithm() forces Direct (bit-for-bit comparisons with the im2col
/// reference and PyTorch at tight tolerances) or Winograd (where oneDNN supports it: 3x3,
/// stride 1, no dilation, AVX-512); Auto takes Winograd where the shape table in
/// winograd_pays() says it measured faster. The choice is deterministic, not timed at run time,
/// so a resumed training run computes exactly what an uninterrupted one does.

namespace {

using dnnl::memory;
using Algo = dnnl::algorithm;

// ForwardRelu: the forward pass with a ReLU post-op, relu(conv(x)) written in one go (conv2d_relu).
enum class Pass : uint8_t { Forward, ForwardRelu, BackwardData, BackwardWeights };

struct PlanKey {
  Pass pass;
  Algo algo;
  bool bias;
  int64_t dims[14];
  bool operator==(const PlanKey& o) const {
    return pass == o.pass && algo == o.algo && bias == o.bias && std::memcmp(dims, o.dims, sizeof dims) == 0;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = static_cast<size_t>(k.pass) * 31 + static_cast<size_t>(k.algo) * 7 + k.bias;
    for (int64_t d : k.dims) h = h * 1000003u ^ static_cast<size_t>(d);
    return h;
  }
};

/// A reorder between two layouts, absent when they are the same.
struct Reorder {
  memory::desc from, to;
  std::optional<dnnl::reorder> prim;
  Reorder() = default;
  Reorder(const memory::desc& f, const memory::desc& t) : from(f), to(t) {
    if (f != t) prim.emplace(dnnl::reorder::primitive_desc(engine(), f, engine(), t));
  }
  /// `src` (layout `from`) in layout `to`: src itself when the layouts agree.
  Tensor apply(const Tensor& src) const {
    if (!prim) return src;
    Tensor dst = buffer_for(to);
    run(src.data_ptr<float>(), dst.data_ptr<float>());
    return dst;
  }
  void run(const float* src, float* dst) const {
    auto s = view(from, src), d = view(to, dst);
    prim->execute(stream(), {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, d}});
  }
};

/// A reordered copy of one weight tensor, valid while its storage lives at this version.
struct CachedWeight {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  Tensor buffer;
};

/// One pass of one convolution shape with one algorithm.
/// Roles: `x` the activation at the input side (src or diff_src), `w` the weights (or their
/// gradient), `y` the activation at the output side (dst or diff_dst).
struct Plan {
  Algo algo = Algo::convolution_direct;
  dnnl::primitive prim;
  memory::desc x, w, y, bias, scratch;
  Reorder x_plain, w_plain, y_plain;  // plain → primitive (inputs) or primitive → plain (outputs)
  std::shared_ptr<const BlockedLayout> x_layout, y_layout;  // null where the primitive wants plain
  std::unordered_map<const void*, CachedWeight> weights;  // by the plain weights' address
};

memory::dims dims_of(const ConvGeometry& g, char which) {
  switch (which) {
    case 'x': return {g.n, g.c, g.h, g.w};
    case 'y': return {g.n, g.o, g.oh, g.ow};
    default: return {g.o, g.cg(), g.kh, g.kw};  // groups == 1 (see handles())
  }
}

memory::desc any(const memory::dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }

struct Cache {
  std::mutex mutex;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  ConvCacheStats stats;
};

Cache& cache() {
  static Cache c;
  return c;
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvGeometry& g, Algo algo, bool bias, bool relu = false) {
  const memory::dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  const memory::desc b = bias ? any({g.o}) : memory::desc();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, algo, any(dims_of(g, 'x')), any(dims_of(g, 'w')), b,
                                    any(dims_of(g, 'y')), strides, dil, pad, pad);
  dnnl::primitive_attr attr = default_attr();
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, Algo::eltwise_relu, 0.0f, 0.0f);  // scale 1, negative slope 0
    attr.set_post_ops(ops);
  }
  return {d, attr, engine()};
}

std::unique_ptr<Plan> make_plan(const ConvGeometry& g, Pass pass, Algo algo, bool bias) {
  const memory::dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  auto plan = std::make_unique<Plan>();
  plan->algo = algo;
  const auto fwd = forward_pd(g, algo, bias, pass == Pass::ForwardRelu);
  if (pass == Pass::Forward || pass == Pass::ForwardRelu) {
    plan->prim = dnnl::convolution_forward(fwd);
    plan->x = fwd.src_desc(), plan->w = fwd.weights_desc(), plan->y = fwd.dst_desc(), plan->bias = fwd.bias_desc();
    plan->scratch = fwd.scratchpad_desc();
    plan->x_plain = Reorder(plain_nchw(dims_of(g, 'x')), plan->x);
    plan->y_plain = Reorder(plan->y, plain_nchw(dims_of(g, 'y')));
  } else if (pass == Pass::BackwardData) {
    dnnl::convolution_backward_data::desc d(algo, any(dims_of(g, 'x')), any(dims_of(g, 'w')), any(dims_of(g, 'y')), strides,
                                            dil, pad, pad);
    dnnl::convolution_backward_data::primitive_desc pd(d, default_attr(), engine(), fwd);
    plan->prim = dnnl::convolution_backward_data(pd);
    plan->x = pd.diff_src_desc(), plan->w = pd.weights_desc(), plan->y = pd.diff_dst_desc();
    plan->scratch = pd.scratchpad_desc();
    plan->x_plain = Reorder(plan->x, plain_nchw(dims_of(g, 'x')));
    plan->y_plain = Reorder(plain_nchw(dims_of(g, 'y')), plan->y);
  } else {
    const memory::desc b = bias ? any({g.o}) : memory::desc();
    dnnl::convolution_backward_weights::desc d(algo, any(dims_of(g, 'x')), any(dims_of(g, 'w')), b, any(dims_of(g, 'y')),
                                               strides, dil, pad, pad);
    dnnl::convolution_backward_weights::primitive_desc pd(d, default_attr(), engine(), fwd);
    plan->prim = dnnl::convolution_backward_weights(pd);
    plan->x = pd.src_desc(), plan->w = pd.diff_weights_desc(), plan->y = pd.diff_dst_desc(), plan->bias = pd.diff_bias_desc();
    plan->scratch = pd.scratchpad_desc();
    plan->x_plain = Reorder(plain_nchw(dims_of(g, 'x')), plan->x);
    plan->y_plain = Reorder(plain_nchw(dims_of(g, 'y')), plan->y);
    plan->w_plain = Reorder(plan->w, plain_nchw(dims_of(g, 'w')));
    return plan;  // its outputs are weight gradients: always plain
  }
  plan->w_plain = Reorder(plain_nchw(dims_of(g, 'w')), plan->w);
  if (plan->x != plain_nchw(dims_of(g, 'x'))) plan->x_layout = std::make_shared<BlockedLayout>(plan->x);
  if (plan->y != plain_nchw(dims_of(g, 'y'))) plan->y_layout = std::make_shared<BlockedLayout>(plan->y);
  return plan;
}

/// Winograd is worth it (measured with qflow-bench-conv, docs/performance.md) on 3x3 stride-1
/// layers with at least 16 input and output channels (below that the transforms dominate: the
/// 3-channel stem runs at 0.3x direct) and at least 64 output tiles of 4x4 in the batch: its
/// speed over direct was 0.61-0.70x at 16 tiles (batch 1 at 16x16, 8x8 and 4x4 maps), 1.09-1.35x
/// at 64 and 1.5-2.3x from 256 tiles on (batch 128 at every ResNet18 shape).
bool winograd_pays(const ConvGeometry& g) {
  const int64_t tiles = g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4);
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.c >= 16 && g.o >= 16 &&
         tiles >= 64;
}

/// Note [Winograd's scratchpad]
/// Winograd keeps its transformed tiles in the scratchpad, and the one scratchpad (Note [One
/// scratchpad]) grows to the largest request of the process. At batch 128 ResNet18's requests
/// are 9-17 MB (64 and 128 channels), 35-53 MB (256) and 63 MB, but 141 MB for the backward
/// weights of the 512-channel layers: with it a training step peaked at 1204 MB against
/// PyTorch's 1164 MB. Auto runs direct where Winograd would need more than this cap (that pass
/// then runs 2.3x slower, ~7 % of the step).
constexpr size_t kMaxWinogradScratchpad = size_t{64} << 20;

bool wants_winograd(const ConvGeometry& g) {
  switch (conv_algorithm()) {
    case ConvAlgorithm::Direct: return false;
    case ConvAlgorithm::Winograd: return true;
    default: return winograd_pays(g);
  }
}

/// The plan for (g, pass): Winograd when wanted and oneDNN implements it here, else direct.
Plan& plan_for(const ConvGeometry& g, Pass pass, bool bias) {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  const PlanKey key0{pass, Algo::convolution_direct, bias, {g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, 0}};
  const bool winograd = wants_winograd(g);
  PlanKey key = key0;
  if (winograd) key.algo = Algo::convolution_winograd;
  if (auto it = c.plans.find(key); it != c.plans.end()) return *it->second;
  std::unique_ptr<Plan> plan;
  if (winograd) {
    try {
      plan = make_plan(g, pass, Algo::convolution_winograd, bias);
    } catch (const dnnl::error&) {
      // oneDNN has no Winograd kernel for this shape or CPU (it needs AVX-512): the direct plan
      // built below serves under the Winograd key, so the lookup is not repeated.
    }
    if (plan && conv_algorithm() == ConvAlgorithm::Auto && plan->scratch.get_size() > kMaxWinogradScratchpad)
      plan.reset();
  }
  if (!plan) plan = make_plan(g, pass, Algo::convolution_direct, bias);
  ++c.stats.primitive_misses;
  return *c.plans.emplace(key, std::move(plan)).first->second;
}

/// w (plain OIHW) in the plan's weight layout, reordered once per version of its storage.
/// Note [Which reordered weights are kept]: a weight whose version changed since the plan last
/// saw it is being trained, and the next call will bring yet another version, so its reorder is
/// used once and not kept (keeping them cost 90 MB of ResNet18 training memory for no reuse:
/// the forward and backward-data plans hold one copy each). Weights seen at the same version
/// again (inference, evaluation) keep theirs.
Tensor weights_in_layout(Plan& plan, const Tensor& w) {
  if (!plan.w_plain.prim) return w;
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  const std::shared_ptr<Storage>& storage = w.impl()->storage();
  const uint64_t version = storage->version();
  CachedWeight& e = plan.weights[w.data_ptr<float>()];
  const bool same_weight = e.storage.lock() == storage;
  if (same_weight && e.version == version && e.buffer.defined()) {
    ++c.stats.weight_reuses;
    return e.buffer;
  }
  for (auto it = plan.weights.begin(); it != plan.weights.end();)  // forget dead weights
    it = it->second.storage.expired() && &it->second != &e ? plan.weights.erase(it) : std::next(it);
  Tensor reordered = plan.w_plain.apply(w);
  ++c.stats.weight_reorders;
  const bool training = same_weight && e.version != version;
  e = CachedWeight{storage, version, training ? Tensor() : reordered};
  return reordered;
}

void execute(const Plan& plan, std::unordered_map<int, memory> args) {
  args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad(plan.scratch));
  plan.prim.execute(stream(), args);
}

float* ptr(const Tensor& t) { return static_cast<float*>(t.impl()->data()); }  // never converts

/// Activation `t` (plain NCHW or blocked) as bytes in layout `md`: t itself when it already is,
/// else converted (a counted layout conversion, see Note [Opaque layouts]).
Tensor in_layout(const Tensor& t, const memory::desc& md, const Reorder& from_plain) {
  if (const BlockedLayout* l = blocked_layout(t)) {
    if (l->desc() == md) return t;
    Tensor out = buffer_for(md);
    auto src = raw_view(l->desc(), t), dst = view(md, ptr(out));
    dnnl::reorder(src, dst).execute(stream(), src, dst);
    count_layout_conversion();
    return out;
  }
  if (!from_plain.prim) return t;
  count_layout_conversion();
  return from_plain.apply(t);
}

/// The buffer a primitive writes an activation of layout `md` into: a blocked tensor when the
/// layout is kept between layers, plain when the primitive writes plain, else a scratch
/// buffer that finish_output() converts.
Tensor output_buffer(const memory::desc& md, const std::shared_ptr<const BlockedLayout>& layout, const memory::dims& dims) {
  if (!layout) return new_tensor(std::vector<int64_t>(dims.begin(), dims.end()), DType::Float32);
  if (conv_keeps_blocked_layout()) return new_blocked_tensor(dims, layout);
  return buffer_for(md);
}

Tensor finish_output(const Tensor& produced, const Reorder& to_plain_reorder,
                     const std::shared_ptr<const BlockedLayout>& layout, const memory::dims& dims) {
  if (!layout || conv_keeps_blocked_layout()) return produced;
  Tensor plain = new_tensor(std::vector<int64_t>(dims.begin(), dims.end()), DType::Float32);
  to_plain_reorder.run(ptr(produced), ptr(plain));
  count_layout_conversion();
  return plain;
}

}  // namespace

bool handles(const ConvGeometry& g, DType dtype) {
  // Grouped convolutions (depthwise ones included) keep their own kernels for now.
  return conv_engine() == ConvEngine::OneDNN && dtype == DType::Float32 && g.groups == 1 && g.n > 0;
}

bool uses_winograd(const ConvGeometry& g) {
  return handles(g, DType::Float32) && plan_for(g, Pass::Forward, false).algo == Algo::convolution_winograd;
}

Tensor conv2d_forward(const ConvGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu) {
  Plan& plan = plan_for(g, relu ? Pass::ForwardRelu : Pass::Forward, bias.defined());
  const Tensor xs = in_layout(x, plan.x, plan.x_plain);
  const Tensor ws = weights_in_layout(plan, w);
  Tensor y = output_buffer(plan.y, plan.y_layout, dims_of(g, 'y'));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, view(plan.x, ptr(xs))},
                                       {DNNL_ARG_WEIGHTS, view(plan.w, ptr(ws))},
                                       {DNNL_ARG_DST, view(plan.y, ptr(y))}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, view(plan.bias, ptr(bias)));
  execute(plan, std::move(args));
  return finish_output(y, plan.y_plain, plan.y_layout, dims_of(g, 'y'));
}

Tensor conv2d_backward_data(const ConvGeometry& g, const Tensor& gy, const Tensor& w) {
  Plan& plan = plan_for(g, Pass::BackwardData, false);
  const Tensor gys = in_layout(gy, plan.y, plan.y_plain);
  const Tensor ws = weights_in_layout(plan, w);
  Tensor gx = output_buffer(plan.x, plan.x_layout, dims_of(g, 'x'));
  execute(plan, {{DNNL_ARG_DIFF_DST, view(plan.y, ptr(gys))},
                 {DNNL_ARG_WEIGHTS, view(plan.w, ptr(ws))},
                 {DNNL_ARG_DIFF_SRC, view(plan.x, ptr(gx))}});
  return finish_output(gx, plan.x_plain, plan.x_layout, dims_of(g, 'x'));
}

std::pair<Tensor, Tensor> conv2d_backward_weights(const ConvGeometry& g, const Tensor& gy, const Tensor& x, bool want_bias) {
  Plan& plan = plan_for(g, Pass::BackwardWeights, want_bias);
  const Tensor xs = in_layout(x, plan.x, plan.x_plain);
  const Tensor gys = in_layout(gy, plan.y, plan.y_plain);
  Tensor gw = plan.w_plain.prim ? buffer_for(plan.w) : new_tensor({g.o, g.cg(), g.kh, g.kw}, DType::Float32);
  Tensor gb = want_bias ? new_tensor({g.o}, DType::Float32) : Tensor();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, view(plan.x, ptr(xs))},
                                       {DNNL_ARG_DIFF_DST, view(plan.y, ptr(gys))},
                                       {DNNL_ARG_DIFF_WEIGHTS, view(plan.w, ptr(gw))}};
  if (want_bias) args.emplace(DNNL_ARG_DIFF_BIAS, view(plan.bias, ptr(gb)));
  execute(plan, std::move(args));
  if (!plan.w_plain.prim) return {gw, gb};
  Tensor plain = new_tensor({g.o, g.cg(), g.kh, g.kw}, DType::Float32);
  plan.w_plain.run(ptr(gw), ptr(plain));
  return {plain, gb};
}

}  // namespace qflow::kernels::onednn

namespace qflow {

using kernels::onednn::cache;

ConvCacheStats conv_cache_stats() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  ConvCacheStats s = c.stats;
  s.primitives = static_cast<int64_t>(c.plans.size());
  return s;
}

void clear_conv_cache() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  c.plans.clear();
}

}  // namespace qflow
