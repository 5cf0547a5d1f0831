#pragma once
// Learning-rate schedules. Each schedule is a factor of the base learning rate as a
// function of the step count; ChainedScheduler multiplies factors, which is how a warm-up
// composes with any decay (LinearWarmup then cosine, as in the CIFAR recipes).
#include <memory>
#include <vector>

#include "qflow/nn/optim/optimizer.h"

namespace qflow::nn::optim {

class LRScheduler {
 public:
  /// Remembers each group's current lr as its base lr and applies step 0.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one step (an epoch or an iteration, as the caller decides) and sets the lrs.
  void step();
  int64_t last_step() const { return step_; }
  std::vector<double> last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// lr of `group` at step `t` = base · factor(t, base).
  virtual double factor(int64_t t, double base_lr) const = 0;

  /// "last_step" and "base_lr.<g>" as named tensors, for checkpoints.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 protected:
  void apply();
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};

/// lr · gamma^(t / step_size)
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);
  double factor(int64_t t, double base) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr · gamma^(number of milestones <= t)
class MultiStepLR final : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1);
  double factor(int64_t t, double base) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// eta_min + (lr − eta_min)·(1 + cos(π·t / T_max)) / 2 (PyTorch's closed form, periodic past T_max).
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0.0);
  double factor(int64_t t, double base) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// Linear ramp from start_factor·lr to lr over `warmup_steps`, then constant.
class LinearWarmup final : public LRScheduler {
 public:
  LinearWarmup(Optimizer& opt, int64_t warmup_steps, double start_factor = 0.1);
  double factor(int64_t t, double base) const override;

 private:
  int64_t warmup_;
  double start_;
};

/// The product of several schedules' factors, stepped together.
class ChainedScheduler final : public LRScheduler {
 public:
  ChainedScheduler(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> parts);
  double factor(int64_t t, double base) const override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> parts_;
};

}  // namespace qflow::nn::optim
