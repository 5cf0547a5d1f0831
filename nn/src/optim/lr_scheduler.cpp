#include "qflow/nn/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "qflow/core/factory.h"

namespace qflow::nn::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) optimizer_.set_lr(g, base_lrs_[g] * factor(step_, base_lrs_[g]));
}

void LRScheduler::step() {
  ++step_;
  apply();
}

std::vector<double> LRScheduler::last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < optimizer_.num_groups(); ++g) out.push_back(optimizer_.lr(g));
  return out;
}

NamedTensors LRScheduler::state_dict() const {
  NamedTensors out{{"last_step", scalar_tensor(step_, DType::Int64)}};
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    out.emplace_back(fmt::format("base_lr.{}", g), scalar_tensor(base_lrs_[g], DType::Float64));
  return out;
}

void LRScheduler::load_state_dict(const NamedTensors& state) {
  auto get = [&](const std::string& key) {
    for (const auto& [k, v] : state)
      if (k == key && v.numel() == 1) return v;
    QFLOW_FAIL("lr_scheduler.load_state_dict: missing or malformed entry '{}'", key);
  };
  const Tensor last = get("last_step");
  QFLOW_CHECK(last.dtype() == DType::Int64, "lr_scheduler.load_state_dict: 'last_step' must be int64, got {}",
              last.dtype());
  const int64_t step = last.item<int64_t>();
  // step() counts on from here; a count near the int64 limit is a damaged file, not a schedule.
  QFLOW_CHECK(step >= 0 && step < (int64_t{1} << 62), "lr_scheduler.load_state_dict: 'last_step' is {}", step);
  std::vector<double> bases;
  for (size_t g = 0; g < base_lrs_.size(); ++g) bases.push_back(get(fmt::format("base_lr.{}", g)).item<double>());
  step_ = step;
  base_lrs_ = std::move(bases);
  apply();
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma) : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  QFLOW_CHECK(step_size > 0, "StepLR: step_size must be positive, got {}", step_size);
}
double StepLR::factor(int64_t t, double) const { return std::pow(gamma_, static_cast<double>(t / step_size_)); }

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones_(std::move(milestones)), gamma_(gamma) {
  QFLOW_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), "MultiStepLR: milestones must be increasing, got {}",
              milestones_);
}
double MultiStepLR::factor(int64_t t, double) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), t) - milestones_.begin();
  return std::pow(gamma_, static_cast<double>(passed));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  QFLOW_CHECK(t_max > 0, "CosineAnnealingLR: T_max must be positive, got {}", t_max);
}
double CosineAnnealingLR::factor(int64_t t, double base) const {
  if (base == 0) return 0.0;
  const double cosine = (1.0 + std::cos(std::numbers::pi * static_cast<double>(t) / static_cast<double>(t_max_))) / 2.0;
  return (eta_min_ + (base - eta_min_) * cosine) / base;
}

LinearWarmup::LinearWarmup(Optimizer& opt, int64_t warmup_steps, double start_factor)
    : LRScheduler(opt), warmup_(warmup_steps), start_(start_factor) {
  QFLOW_CHECK(warmup_steps >= 0, "LinearWarmup: warmup_steps must be non-negative, got {}", warmup_steps);
  QFLOW_CHECK(start_factor > 0 && start_factor <= 1, "LinearWarmup: start_factor must be in (0, 1], got {}", start_factor);
  apply();
}
double LinearWarmup::factor(int64_t t, double) const {
  if (warmup_ == 0 || t >= warmup_) return 1.0;
  return start_ + (1.0 - start_) * static_cast<double>(t) / static_cast<double>(warmup_);
}

ChainedScheduler::ChainedScheduler(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> parts)
    : LRScheduler(opt), parts_(std::move(parts)) {
  // A part may already have applied its step-0 factor (warm-up does); the true base lrs are
  // the ones the first part recorded before that.
  if (!parts_.empty()) base_lrs_ = parts_.front()->base_lrs();
  apply();
}
double ChainedScheduler::factor(int64_t t, double base) const {
  double f = 1.0;
  for (const auto& p : parts_) f *= p->factor(t, base);
  return f;
}

}  // namespace qflow::nn::optim
