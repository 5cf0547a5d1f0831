#pragma once
// Observers: modules that record the range of the tensors flowing through them and turn it
// into quantization parameters. Their statistics are buffers, so state_dict saves, loads and
// resumes them with the model.
//
//   auto obs = std::make_shared<MovingAverageMinMaxObserver>(ObserverOptions{.qconfig = qc});
//   (*obs)(x);                                   // records x's range (training mode only)
//   Tensor y = quant::fake_quantize(x, obs->calculate_qparams(), qc);
//
// Buffers (state_dict keys): min_val, max_val ((1) per tensor, (C) per channel),
// num_batches_tracked (int64, observations so far) and frozen (bool).
// An observer records only while its module is in training mode and not frozen. Until it has
// recorded something its range is [0, 0], whose scale 0 makes fake quantization the identity.
// Post-training calibration runs the model in eval mode with the observers alone switched
// back to training mode (observer->train()).
#include <functional>
#include <memory>

#include "qflow/nn/cloneable.h"
#include "qflow/quant/qparams.h"

namespace qflow::quant {

struct ObserverOptions {
  QConfig qconfig = {};
  /// 0: one range for the whole tensor. C > 0: one range per index of axis 0 (the output
  /// channel of a weight), and observed tensors must have C entries along axis 0.
  int64_t channels = 0;
  /// MinMaxObserver: keep the widest range seen since the start (PyTorch's MinMaxObserver)
  /// instead of the latest tensor's.
  bool accumulate = false;
};

/// What every observer shares: the statistics buffers, freezing and the qparams.
/// (A mixin beside nn::Cloneable, so freeze_observers can find every observer type.) The
/// learned quantizers (learned_quantizer.h) are observers too: their qparams come from
/// parameters, and their fake quantization carries a gradient to them.
class Observer {
 public:
  virtual ~Observer() = default;

  /// compute_qparams(min_val, max_val, qconfig), per channel along axis 0 when channels > 0.
  /// A learned quantizer returns its current (detached) scale and zero point.
  virtual QParams calculate_qparams() const;
  /// x fake-quantized with this observer's qparams and QConfig (quant::fake_quantize); a
  /// learned quantizer's version also differentiates with respect to its parameters.
  virtual Tensor fake_quantize(const Tensor& x) const;
  /// The nn::Module this observer is (every observer is one).
  nn::Module& module();
  const nn::Module& module() const;
  /// Stops (true) or resumes (false) recording; kept in the "frozen" buffer.
  void freeze(bool frozen = true);
  bool is_frozen() const;
  /// How many tensors have been recorded (the num_batches_tracked buffer; a read from the device).
  int64_t num_observations() const;
  /// num_observations() > 0, read from the device only when the count changed other than
  /// through this observer's store() (Note [Observed, on the host]).
  bool observed() const;
  const ObserverOptions& options() const { return options_; }
  const QConfig& qconfig() const { return options_.qconfig; }
  const Tensor& min_val() const { return min_val_; }
  const Tensor& max_val() const { return max_val_; }

  /// Combines the range a forward just measured (min, max: (1) or (C) float32, replaced in
  /// place) with the other processes' before it is recorded, so data-parallel replicas keep
  /// identical ranges (distributed::synchronize_observers installs an allreduce). Null: the
  /// local range alone. Not part of state_dict; clones share it.
  using RangeSync = std::function<void(Tensor& min, Tensor& max)>;
  void set_range_sync(RangeSync sync) { range_sync_ = std::move(sync); }
  bool has_range_sync() const { return static_cast<bool>(range_sync_); }

 protected:
  explicit Observer(ObserverOptions options);
  Observer(const Observer&) = default;
  /// Registers the four buffers on `self` (the observer module) and binds the members.
  void register_statistics(nn::Module& self);
  /// True when `self` is training and (on the CPU) not frozen: on a GPU the flag is not read
  /// back, store() keeps a frozen observer's range (Note [Observers stay on their device]).
  bool should_record(const nn::Module& self) const;
  /// Stores a new range (no autograd) and counts the observation; a frozen observer's stays.
  void store(const Tensor& min, const Tensor& max);
  /// 0-d bool on the statistics' device: whether a batch was recorded (read without a sync).
  Tensor has_observed() const;
  std::string describe() const;

  /// The batch's range after range_sync (unchanged without one).
  Range synchronized(Range r) const;

  Tensor min_val_, max_val_, num_batches_tracked_, frozen_;

 private:
  ObserverOptions options_;
  RangeSync range_sync_;
  // observed()'s answer, valid while the count's storage is at this version.
  mutable std::weak_ptr<const Storage> observed_storage_;
  mutable uint64_t observed_version_ = 0;
  mutable bool observed_ = false;
};

/// Records the range of the latest tensor it saw (OneFlow's min_max_observer): weights, whose
/// range moves every step, are quantized with their current range, not a stale running one.
/// Per tensor or per channel (axis 0). With options.accumulate, the widest range seen since
/// the start instead (activations under QConfig observer = minmax).
class MinMaxObserver : public nn::Cloneable<MinMaxObserver>, public Observer {
 public:
  explicit MinMaxObserver(ObserverOptions options = {});
  void reset();
  /// Records x's range when training and not frozen; returns x unchanged.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
};

/// Exponential moving average of per-tensor ranges (activations): the first observation seeds
/// the average, then avg = momentum · avg + (1 − momentum) · current (float32). Symmetric
/// schemes track a = max(|min|, |max|) and store the range [−a, a]; affine tracks min and max
/// separately.
class MovingAverageMinMaxObserver : public nn::Cloneable<MovingAverageMinMaxObserver>, public Observer {
 public:
  explicit MovingAverageMinMaxObserver(ObserverOptions options = {});
  void reset();
  /// Records x's range when training and not frozen; returns x unchanged.
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
};

/// The op "observe_moving_average_(Tensor self, Tensor(a!) min_val, Tensor(b!) max_val, Tensor(c!)
/// num_batches_tracked, Tensor frozen, float momentum, bool symmetric) -> ()": a
/// MovingAverageMinMaxObserver's update of its buffers from x in one op (Note [Observers stay
/// on their device]). Call it under NoGradGuard.
void observe_moving_average_(const Tensor& x, const Tensor& min_val, const Tensor& max_val,
                             const Tensor& num_batches_tracked, const Tensor& frozen, float momentum, bool symmetric);

/// The observer a QConfig's `observer` selects for a Q module's input (activations, per
/// tensor) or weight (`channels` ranges, 0 = per tensor): see ObserverKind.
std::shared_ptr<Observer> make_input_observer(const QConfig& qconfig);
std::shared_ptr<Observer> make_weight_observer(const QConfig& qconfig, int64_t channels);

/// Freezes (or, with frozen = false, unfreezes) every observer in `root`'s tree, `root`
/// included; returns how many there were. Works on any module, e.g. a QAT GraphModule.
int64_t freeze_observers(nn::Module& root, bool frozen = true);

}  // namespace qflow::quant
