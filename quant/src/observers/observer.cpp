#include "qflow/quant/observer.h"

#include <algorithm>
#include <cmath>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/quant/histogram_observer.h"
#include "qflow/quant/learned_quantizer.h"
#include "moving_average_update.h"

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

// Note [Observed, on the host]
// The learned quantizers (LSQ, TQT) branch on the host on whether they have seen a batch: the
// first one initialises their parameters from its statistics. Reading the count from a GPU
// every forward is a synchronisation per layer and step, and it cannot be recorded into a
// graph (Note [Captured device work]). The count never decreases, so once it was read > 0 the
// answer stays valid while nothing but store() wrote it: the answer is kept with the count
// storage's version, and store() moves that version along with its own write. A load, a reset
// (a new storage) or a replayed graph changes the version, and the next question reads again.
namespace {
// The count's storage and version (a buffer always has a storage; null reads as version 0).
std::pair<std::shared_ptr<Storage>, uint64_t> count_version(const Tensor& count) {
  std::shared_ptr<Storage> s = count.impl()->storage();
  const uint64_t v = s != nullptr ? s->version() : 0;
  return {std::move(s), v};
}
}  // namespace

bool Observer::observed() const {
  const auto [storage, version] = count_version(num_batches_tracked_);
  if (observed_storage_.lock() != storage || observed_version_ != version) {
    observed_ = num_observations() > 0;
    observed_storage_ = storage;
    observed_version_ = version;
  }
  return observed_;
}

// Note [Observers stay on their device]
// An observer's statistics are tensors on the observed tensor's device, updated with tensor
// ops (the range's min/max, the moving average, choose_qparams), so that on a GPU a QAT step
// never reads a statistic back to the host: one such read per quantized layer is a
// synchronisation that stalls the whole step (51 of them in a ResNet18 step). Two decisions
// would need a read: whether the observer is frozen, and whether it has seen a batch (the first
// seeds the average). On a GPU the first is made by store() with `where` (the range is computed
// and discarded), the second by the update itself with `where`; on the CPU the frozen flag is
// read (cheap there) and a frozen observer skips the work. The arithmetic is the same on both:
// m · old + (1 − m) · new in float32, each product rounded.
bool Observer::should_record(const nn::Module& self) const {
  if (!self.is_training()) return false;
  return !frozen_.device().is_cpu() || !is_frozen();
}

void Observer::store(const Tensor& min, const Tensor& max) {
  NoGradGuard no_grad;
  Tensor lo = min_val_, hi = max_val_, count = num_batches_tracked_;
  const auto [storage, version] = count_version(count);
  const bool was_observed = observed_ && observed_storage_.lock() == storage && observed_version_ == version;
  // On the CPU should_record read the flag and a frozen observer never gets here.
  lo.copy_(where(frozen_, lo, min));
  hi.copy_(where(frozen_, hi, max));
  count.copy_(where(frozen_, count, count + 1));
  if (was_observed) observed_version_ = count_version(count).second;  // the count only grew (Note [Observed, on the host])
}

Tensor Observer::has_observed() const { return gt(num_batches_tracked_, 0); }

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
  NoGradGuard no_grad;
  Range r = synchronized(tensor_range(x, channels > 0));
  if (options().accumulate) {  // Note [Observers stay on their device]
    const Tensor seen = has_observed();
    r = {where(seen, minimum(r.min, min_val_), r.min), where(seen, maximum(r.max, max_val_), r.max)};
  }
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
  NoGradGuard no_grad;
  const float m = static_cast<float>(qconfig().momentum);
  const bool symmetric = qconfig().scheme == Scheme::Symmetric;
  // One op (two launches on a GPU), unless the range is first synchronised across processes.
  // Note [Observers stay on their device].
  if (has_range_sync())
    detail::moving_average_update(synchronized(tensor_range(x, false)), min_val_, max_val_, num_batches_tracked_,
                                  frozen_, m, symmetric);
  else
    observe_moving_average_(x, min_val_, max_val_, num_batches_tracked_, frozen_, m, symmetric);
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
