#include "qflow/quant/observer.h"

#include <algorithm>
#include <cmath>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/quant/histogram_observer.h"
#include "qflow/quant/learned_quantizer.h"

namespace qflow::quant {

// ---- Observer ------------------------------------------------------------------------------------

Observer::Observer(ObserverOptions options) : options_(options) {
  options_.qconfig.validate();
  QFLOW_CHECK(options_.channels >= 0, "Observer: channels must be >= 0 (0 = per tensor), got {}", options_.channels);
}

void Observer::register_statistics(nn::Module& self) {
  const int64_t n = std::max<int64_t>(options_.channels, 1);
  min_val_ = self.register_buffer("min_val", zeros({n}));
  max_val_ = self.register_buffer("max_val", zeros({n}));
  num_batches_tracked_ = self.register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  frozen_ = self.register_buffer("frozen", zeros({}, DType::Bool));
}

QParams Observer::calculate_qparams() const { return compute_qparams(min_val_, max_val_, options_.qconfig, 0); }

Tensor Observer::fake_quantize(const Tensor& x) const { return quant::fake_quantize(x, calculate_qparams(), qconfig()); }

nn::Module& Observer::module() {
  auto* m = dynamic_cast<nn::Module*>(this);
  QFLOW_ASSERT(m != nullptr, "an Observer that is not an nn::Module");
  return *m;
}

const nn::Module& Observer::module() const { return const_cast<Observer*>(this)->module(); }

void Observer::freeze(bool frozen) {
  NoGradGuard no_grad;
  Tensor f = frozen_;
  f.fill_(frozen);
}

bool Observer::is_frozen() const { return frozen_.item<bool>(); }

int64_t Observer::num_observations() const { return num_batches_tracked_.item<int64_t>(); }

bool Observer::should_record(const nn::Module& self) const { return self.is_training() && !is_frozen(); }

void Observer::store(const Tensor& min, const Tensor& max) {
  NoGradGuard no_grad;
  Tensor lo = min_val_, hi = max_val_, count = num_batches_tracked_;
  lo.copy_(min);
  hi.copy_(max);
  count.add_(1);
}

Range Observer::synchronized(Range r) const {
  if (range_sync_) range_sync_(r.min, r.max);
  return r;
}

std::string Observer::describe() const {
  const QConfig& qc = options_.qconfig;
  std::string s = fmt::format("bits={}, scheme={}, formula={}", qc.bits, to_string(qc.scheme), to_string(qc.formula));
  if (options_.channels > 0) s += fmt::format(", channels={}", options_.channels);
  return s;
}

// ---- MinMaxObserver --------------------------------------------------------------------------------

MinMaxObserver::MinMaxObserver(ObserverOptions options) : Observer(options) { reset(); }

void MinMaxObserver::reset() { register_statistics(*this); }

Tensor MinMaxObserver::forward(const Tensor& x) {
  if (!should_record(*this)) return x;
  const int64_t channels = options().channels;
  QFLOW_CHECK(channels == 0 || (x.dim() >= 1 && x.sizes()[0] == channels),
              "MinMaxObserver: expected {} channels along axis 0, got a tensor of shape {}", channels, x.sizes());
  Range r = synchronized(tensor_range(x, channels > 0));
  if (options().accumulate && num_observations() > 0) r = {minimum(r.min, min_val_), maximum(r.max, max_val_)};
  store(r.min, r.max);
  return x;
}

std::string MinMaxObserver::extra_repr() const { return describe() + (options().accumulate ? ", accumulate=True" : ""); }

// ---- MovingAverageMinMaxObserver -------------------------------------------------------------------

MovingAverageMinMaxObserver::MovingAverageMinMaxObserver(ObserverOptions options) : Observer(options) {
  QFLOW_CHECK(options.channels == 0, "MovingAverageMinMaxObserver: only per-tensor ranges are supported, got channels={}",
              options.channels);
  reset();
}

void MovingAverageMinMaxObserver::reset() { register_statistics(*this); }

Tensor MovingAverageMinMaxObserver::forward(const Tensor& x) {
  if (!should_record(*this)) return x;
  const Range r = synchronized(tensor_range(x, false));
  float lo = r.min.item<float>(), hi = r.max.item<float>();
  if (qconfig().scheme == Scheme::Symmetric) {
    hi = std::max(std::fabs(lo), std::fabs(hi));
    lo = -hi;
  }
  if (num_observations() > 0) {  // the first observation seeds the average
    const float m = static_cast<float>(qconfig().momentum);
    lo = m * min_val_.item<float>() + (1.0f - m) * lo;
    hi = m * max_val_.item<float>() + (1.0f - m) * hi;
  }
  store(scalar_tensor(lo), scalar_tensor(hi));
  return x;
}

std::string MovingAverageMinMaxObserver::extra_repr() const {
  return fmt::format("{}, momentum={}", describe(), qconfig().momentum);
}

// ---- make_input_observer / make_weight_observer -----------------------------------------------------

std::shared_ptr<Observer> make_input_observer(const QConfig& qconfig) {
  switch (qconfig.observer) {
    case ObserverKind::MovingAverage: return std::make_shared<MovingAverageMinMaxObserver>(ObserverOptions{.qconfig = qconfig});
    case ObserverKind::MinMax: return std::make_shared<MinMaxObserver>(ObserverOptions{.qconfig = qconfig, .accumulate = true});
    case ObserverKind::Lsq: return std::make_shared<LsqQuantizer>(ObserverOptions{.qconfig = qconfig});
    case ObserverKind::Tqt: return std::make_shared<TqtQuantizer>(ObserverOptions{.qconfig = qconfig});
    default: return std::make_shared<HistogramObserver>(ObserverOptions{.qconfig = qconfig});
  }
}

std::shared_ptr<Observer> make_weight_observer(const QConfig& qconfig, int64_t channels) {
  const ObserverOptions options{.qconfig = qconfig, .channels = channels};
  if (qconfig.observer == ObserverKind::Lsq) return std::make_shared<LsqQuantizer>(options);
  if (qconfig.observer == ObserverKind::Tqt) return std::make_shared<TqtQuantizer>(options);
  return std::make_shared<MinMaxObserver>(options);
}

// ---- freeze_observers ------------------------------------------------------------------------------

int64_t freeze_observers(nn::Module& root, bool frozen) {
  int64_t count = 0;
  for (const nn::ModulePtr& m : root.modules()) {
    if (auto* obs = dynamic_cast<Observer*>(m.get())) {
      obs->freeze(frozen);
      ++count;
    }
  }
  return count;
}

}  // namespace qflow::quant
