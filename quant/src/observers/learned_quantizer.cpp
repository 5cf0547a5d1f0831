// LSQ and TQT: Note [Learned scales] in learned_quantizer.h.
#include "qflow/quant/learned_quantizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"

namespace qflow::quant {
namespace {

constexpr float kMinScale = 1e-8f;  // a learned scale never reaches 0 (x / s would not be finite)

// `t` ((1) or (C)) shaped to broadcast against x along axis 0: (C, 1, ..., 1).
Tensor along_axis0(const Tensor& t, const Tensor& x) {
  if (t.numel() == 1 || x.dim() <= 1) return t;
  IntList shape(static_cast<size_t>(x.dim()), 1);
  shape[0] = t.numel();
  return t.reshape(SymIntList(shape.begin(), shape.end()));
}

// Elements one scale covers (the paper's N).
double elements_per_scale(const Tensor& x, int64_t scales) { return static_cast<double>(x.numel()) / static_cast<double>(scales); }

// mean|x| per tensor ((1)) or per index of axis 0 ((C)), detached float32.
Tensor mean_abs(const Tensor& x, bool per_channel) {
  NoGradGuard no_grad;
  const Tensor a = abs(x.detach()).to(DType::Float32);
  if (!per_channel || a.dim() <= 1) return per_channel ? a.clone() : mean(a).reshape({1});
  IntList rest;
  for (int64_t i = 1; i < a.dim(); ++i) rest.push_back(i);
  return mean(a, rest);
}

// The paper's initial scale 2·mean|x| / √Qp (synchronised across replicas as a range [-m, m]).
std::vector<float> lsq_initial_scale(const Range& synced_mean, const QConfig& qc) {
  std::vector<float> m = to_vector<float>(synced_mean.max);
  for (float& v : m) v = std::max(2.0f * v / std::sqrt(static_cast<float>(qc.quant_max())), kMinScale);
  return m;
}

void assign(Tensor& dst, const std::vector<float>& values) {
  NoGradGuard no_grad;
  dst.copy_(from_vector<float>(values, {static_cast<int64_t>(values.size())}));
}

// The per-channel or per-tensor range of x (synchronised), as the min/max observers record it.
struct InitStats {
  Range range;
  Range mean;  // [-mean|x|, mean|x|]
};

}  // namespace

namespace detail {

Tensor scale_gradient(const Tensor& p, double g) {
  const Tensor scaled = p * Scalar(g);
  return p.detach() + (scaled - scaled.detach());
}

Tensor round_ste(const Tensor& v) { return v + (round(v.detach()) - v.detach()); }

Tensor learned_fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t quant_min,
                             int64_t quant_max) {
  const Tensor s = along_axis0(scale, x), z = along_axis0(zero_point, x);
  const Tensor v = (x / s + z).clamp(Scalar(static_cast<double>(quant_min)), Scalar(static_cast<double>(quant_max)));
  return (round_ste(v) - z) * s;
}

}  // namespace detail

// ---- shared: initialisation statistics ---------------------------------------------------------------

namespace {

InitStats init_stats(const Observer& obs, const Tensor& x) {
  const bool per_channel = obs.options().channels > 0;
  QFLOW_CHECK(!per_channel || (x.dim() >= 1 && x.sizes()[0] == obs.options().channels),
              "{}: expected {} channels along axis 0, got a tensor of shape {}", obs.module().type_name(),
              obs.options().channels, x.sizes());
  const Range range = tensor_range(x, per_channel);
  const Tensor m = mean_abs(x, per_channel);
  return {range, {m.neg(), m}};
}

}  // namespace

// ---- LsqQuantizer -------------------------------------------------------------------------------------

LsqQuantizer::LsqQuantizer(ObserverOptions options) : Observer(options) {
  QFLOW_CHECK(qconfig().formula == Formula::Google,
              "LsqQuantizer: a learned scale is not a power of two (formula cambricon): use TqtQuantizer");
  reset();
}

void LsqQuantizer::reset() {
  register_statistics(*this);
  const int64_t n = std::max<int64_t>(options().channels, 1);
  scale = register_parameter("scale", zeros({n}));
  zero_point = qconfig().learn_zero_point ? register_parameter("zero_point", zeros({n}))
                                          : register_buffer("zero_point", zeros({n}));
}

Tensor LsqQuantizer::forward(const Tensor& x) {
  if (!should_record(*this)) return x;
  if (!observed()) {
    const InitStats st = init_stats(*this, x);
    const Range range = synchronized(st.range);
    std::vector<float> s;
    if (qconfig().scale_init == ScaleInit::Lsq) {
      s = lsq_initial_scale(synchronized(st.mean), qconfig());
    } else {
      s = to_vector<float>(compute_qparams(range.min, range.max, qconfig()).scale);
      for (float& v : s) v = std::max(v, kMinScale);
    }
    std::vector<float> z(s.size(), 0.0f);
    if (qconfig().scheme == Scheme::Affine) {
      const std::vector<float> lo = to_vector<float>(range.min);
      for (size_t c = 0; c < z.size(); ++c)
        z[c] = std::clamp(0.0f - std::nearbyint(std::min(lo[c], 0.0f) / s[c]), 0.0f,
                          static_cast<float>(qconfig().quant_max()));
    }
    assign(scale, s);
    assign(zero_point, z);
    store(range.min, range.max);
    return x;
  }
  {
    NoGradGuard no_grad;  // PyTorch's learnable fake quantization clamps its scale the same way
    scale.clamp_(Scalar(static_cast<double>(kMinScale)), std::nullopt);
  }
  store(min_val_.clone(), max_val_.clone());
  return x;
}

QParams LsqQuantizer::calculate_qparams() const {
  NoGradGuard no_grad;
  Tensor z = zero_point.detach();
  if (qconfig().learn_zero_point)
    z = round(z).clamp(Scalar(static_cast<double>(qconfig().quant_min())), Scalar(static_cast<double>(qconfig().quant_max())));
  const Tensor s = !observed() ? zeros(scale.sizes(), DType::Float32, scale.device()) : scale.detach().clamp(Scalar(static_cast<double>(kMinScale)), std::nullopt);
  return {s.to(DType::Float32).clone(), z.to(DType::Float32).clone(), 0};
}

Tensor LsqQuantizer::fake_quantize(const Tensor& x) const {
  if (!observed()) return x;  // nothing seen: the identity (Note [Quantization numerics])
  const QConfig& qc = qconfig();
  const double g = 1.0 / std::sqrt(elements_per_scale(x, scale.numel()) * static_cast<double>(qc.quant_max()));
  const Tensor s = detail::scale_gradient(scale.clamp(Scalar(static_cast<double>(kMinScale)), std::nullopt), g);
  Tensor z = zero_point;
  if (qc.learn_zero_point)
    z = detail::round_ste(detail::scale_gradient(zero_point, g))
            .clamp(Scalar(static_cast<double>(qc.quant_min())), Scalar(static_cast<double>(qc.quant_max())));
  return detail::learned_fake_quantize(x, s, z, qc.quant_min(), qc.quant_max());
}

std::string LsqQuantizer::extra_repr() const {
  return fmt::format("{}, scale_init={}{}", describe(), to_string(qconfig().scale_init),
                     qconfig().learn_zero_point ? ", learn_zero_point=True" : "");
}

// ---- TqtQuantizer -------------------------------------------------------------------------------------

namespace {

// s = 2^(⌈l⌉ − (b − 1)) per element of l, exactly.
Tensor power_of_two_scale(const Tensor& log2_threshold, int64_t bits) {
  std::vector<float> l = to_vector<float>(log2_threshold.detach());
  for (float& v : l) v = std::ldexp(1.0f, static_cast<int>(std::ceil(v)) - static_cast<int>(bits - 1));
  return from_vector<float>(l, {static_cast<int64_t>(l.size())}).to(log2_threshold.device());
}

}  // namespace

TqtQuantizer::TqtQuantizer(ObserverOptions options) : Observer(options) {
  QFLOW_CHECK(qconfig().scheme == Scheme::Symmetric,
              "TqtQuantizer: power-of-two scales need the symmetric scheme, got affine");
  reset();
}

void TqtQuantizer::reset() {
  register_statistics(*this);
  log2_threshold = register_parameter("log2_threshold", zeros({std::max<int64_t>(options().channels, 1)}));
}

Tensor TqtQuantizer::forward(const Tensor& x) {
  if (!should_record(*this)) return x;
  if (observed()) {
    store(min_val_.clone(), max_val_.clone());
    return x;
  }
  const InitStats st = init_stats(*this, x);
  const Range range = synchronized(st.range);
  std::vector<float> t;
  if (qconfig().scale_init == ScaleInit::Lsq) {
    t = lsq_initial_scale(synchronized(st.mean), qconfig());
    for (float& v : t) v = std::ldexp(v, static_cast<int>(qconfig().bits - 1));
  } else {
    const std::vector<float> lo = to_vector<float>(range.min), hi = to_vector<float>(range.max);
    for (size_t c = 0; c < lo.size(); ++c) t.push_back(std::max(std::fabs(lo[c]), std::fabs(hi[c])));
  }
  for (float& v : t) v = std::log2(std::max(v, kMinScale));
  assign(log2_threshold, t);
  store(range.min, range.max);
  return x;
}

QParams TqtQuantizer::calculate_qparams() const {
  NoGradGuard no_grad;
  const int64_t n = log2_threshold.numel();
  const Device device = log2_threshold.device();
  if (!observed()) return {zeros({n}, DType::Float32, device), zeros({n}, DType::Float32, device), 0};
  return {power_of_two_scale(log2_threshold, qconfig().bits), zeros({n}, DType::Float32, device), 0};
}

Tensor TqtQuantizer::fake_quantize(const Tensor& x) const {
  if (!observed()) return x;
  const QConfig& qc = qconfig();
  const double g = 1.0 / std::sqrt(elements_per_scale(x, log2_threshold.numel()) * static_cast<double>(qc.quant_max()));
  const Tensor s_exact = power_of_two_scale(log2_threshold, qc.bits);
  const Tensor l = detail::scale_gradient(log2_threshold, g);
  // Value s_exact (l − l is 0); gradient ∂s/∂l = s·ln 2: ⌈·⌉ straight through.
  const Tensor s = s_exact + s_exact * Scalar(std::numbers::ln2) * (l - l.detach());
  return detail::learned_fake_quantize(x, s, zeros(s_exact.sizes(), DType::Float32, s_exact.device()), qc.quant_min(), qc.quant_max());
}

std::string TqtQuantizer::extra_repr() const {
  return fmt::format("{}, scale_init={}", describe(), to_string(qconfig().scale_init));
}

// ---- learned_quantization_parameters --------------------------------------------------------------------

std::vector<Tensor> learned_quantization_parameters(nn::Module& root) {
  std::vector<const TensorImpl*> learned;
  for (const nn::ModulePtr& m : root.modules()) {
    if (auto* lsq = dynamic_cast<LsqQuantizer*>(m.get())) {
      learned.push_back(lsq->scale.impl());
      if (lsq->qconfig().learn_zero_point) learned.push_back(lsq->zero_point.impl());
    } else if (auto* tqt = dynamic_cast<TqtQuantizer*>(m.get())) {
      learned.push_back(tqt->log2_threshold.impl());
    }
  }
  std::vector<Tensor> out;
  for (const Tensor& p : root.parameters())
    if (std::find(learned.begin(), learned.end(), p.impl()) != learned.end()) out.push_back(p);
  return out;
}

}  // namespace qflow::quant
