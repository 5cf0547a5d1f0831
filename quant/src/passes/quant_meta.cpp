// annotate_quant_meta: see Note [Quant node meta].
#include "qflow/quant/quant_meta.h"

#include <algorithm>

#include "qflow/core/factory.h"
#include "qflow/quant/deploy.h"
#include "qflow/quant/qconv.h"
#include "qflow/quant/qconvbn.h"
#include "qflow/quant/qlinear.h"

namespace qflow::quant {
namespace {

constexpr const char* kInt8Fill = "#b7e1a1";   // green: the integer kernel
constexpr const char* kFloatFill = "#f9c68f";  // orange: the float simulation

void erase_quant_entries(fx::NodeMeta& meta) {
  for (auto it = meta.extra.begin(); it != meta.extra.end();) {
    if (it->first.rfind("quant.", 0) == 0 || it->first == "dot.caption" || it->first == "dot.fillcolor")
      it = meta.extra.erase(it);
    else ++it;
  }
}

void set_config(fx::NodeMeta& meta, const QConfig& qc) {
  meta.set("quant.bits", static_cast<double>(qc.bits));
  meta.set("quant.scheme", std::string(to_string(qc.scheme)));
  meta.set("quant.formula", std::string(to_string(qc.formula)));
  meta.set("quant.granularity", std::string(qc.per_layer ? "per-layer" : "per-channel"));
}

// One number for a per-tensor scale; "lo..hi (C ch)" for per-channel ones.
fx::MetaValue scale_value(const Tensor& scale) {
  const std::vector<float> s = to_vector<float>(scale.to(DType::Float32));
  if (s.size() == 1) return static_cast<double>(s[0]) + 0.0;  // + 0.0: a zero point of -0 shows as 0
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  return fmt::format("{:.4g}..{:.4g} ({} ch)", *lo, *hi, s.size());
}

void set_scales(fx::NodeMeta& meta, const QConfig& qc, const Tensor& input_scale, const Tensor& input_zero_point,
                const Tensor& weight_scale) {
  meta.set("quant.input_scale", scale_value(input_scale));
  if (qc.scheme == Scheme::Affine) meta.set("quant.input_zero_point", scale_value(input_zero_point));
  meta.set("quant.weight_scale", scale_value(weight_scale));
}

// Which kernel a deployed layer runs: quant.kernel, and for the picture a caption with the
// reason a layer stays in float and a fill colour per kernel (Note [Quant node meta]).
void set_kernel(fx::NodeMeta& meta, const DeployedModule& d) {
  const bool int8 = d.runs_integer();
  meta.set("quant.kernel", std::string(int8 ? "int8" : "float"));
  const std::string why = d.integer() ? d.integer_unsupported() : "integer=False";
  meta.set("dot.caption", int8 ? std::string("runs int8") : "runs float: " + why);
  meta.set("dot.fillcolor", std::string(int8 ? kInt8Fill : kFloatFill));
}

// The meta of one module; false when it is not a quantized module.
bool annotate(fx::NodeMeta& meta, const nn::Module& m) {
  if (const auto* q = dynamic_cast<const QuantModule*>(&m)) {
    set_config(meta, q->qconfig());
    if (!q->fake_quant_enabled()) {
      meta.set("quant.fake_quant", std::string("off"));
    } else if (q->input_observer->num_observations() > 0 && q->weight_observer->num_observations() > 0) {
      const QParams in = q->input_observer->calculate_qparams();
      set_scales(meta, q->qconfig(), in.scale, in.zero_point, q->weight_observer->calculate_qparams().scale);
    }
    return true;
  }
  if (const auto* d = dynamic_cast<const DeployedModule*>(&m)) {
    const detail::DeployedTensors t = d->tensors();
    set_config(meta, d->qconfig());
    set_scales(meta, d->qconfig(), t.input_scale, t.input_zero_point, t.weight_scale);
    set_kernel(meta, *d);
    return true;
  }
  return false;
}

}  // namespace

int64_t annotate_quant_meta(fx::GraphModule& gm) {
  int64_t annotated = 0;
  for (fx::Node* n : gm.graph()) {
    erase_quant_entries(n->meta());
    if (n->op() != fx::NodeOp::CallModule) continue;
    if (annotate(n->meta(), *gm.get_submodule(n->target()))) ++annotated;
  }
  return annotated;
}

}  // namespace qflow::quant
