#pragma once
// Optimizers with PyTorch's update rules and parameter groups.
//
// Note [Optimizer state]
// An optimizer's whole state (per-parameter buffers, step counts, every group's
// hyper-parameters) is a list of named tensors — "state.3.exp_avg", "param_groups.0.lr" —
// so it goes into the same safetensors checkpoint as the model and a resumed run continues
// bit-identically. Parameters are numbered in group order, as in PyTorch.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::nn::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every parameter that has a gradient.
  virtual void step() = 0;
  /// Drops all gradients (PyTorch's set_to_none=True).
  void zero_grad();

  virtual size_t num_groups() const = 0;
  virtual const std::vector<Tensor>& group_params(size_t group) const = 0;
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;

  /// See Note [Optimizer state].
  virtual NamedTensors state_dict() const = 0;
  /// Restores a state_dict of an optimizer over the same parameter shapes; throws naming the
  /// first missing or mismatched entry and leaves the optimizer unchanged on error.
  virtual void load_state_dict(const NamedTensors& state) = 0;
  /// Moves the per-parameter buffers to `device`, after Module::to moved the parameters
  /// (buffers created later follow their parameter's device by themselves).
  virtual void to(Device device) = 0;
};

namespace detail {

/// Shared machinery: groups with typed options and per-parameter named buffers.
template <typename Options>
class OptimizerImpl : public Optimizer {
 public:
  struct Group {
    std::vector<Tensor> params;
    Options options;
  };

  size_t num_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t g) const override { return groups_.at(g).params; }
  double lr(size_t g) const override { return groups_.at(g).options.lr; }
  void set_lr(size_t g, double lr) override { groups_.at(g).options.lr = lr; }
  std::vector<Group>& param_groups() { return groups_; }

  NamedTensors state_dict() const override;
  void load_state_dict(const NamedTensors& state) override;
  void to(Device device) override;

 protected:
  /// One per-parameter buffer step() keeps: a float64 scalar (a step count) or a tensor of the
  /// parameter's shape and dtype.
  struct BufferSpec {
    const char* name;
    bool scalar;
  };
  /// The buffers step() keeps for a parameter: load_state_dict accepts each parameter's state
  /// only as all of these or none (a buffer step() would not find must never get through).
  virtual std::vector<BufferSpec> buffer_specs() const = 0;

  void add_group(std::vector<Tensor> params, Options options);
  /// Buffers of parameter number `index` (created empty on first use).
  std::map<std::string, Tensor>& state(size_t index) { return state_[index]; }

  std::vector<Group> groups_;
  std::map<size_t, std::map<std::string, Tensor>> state_;
};

}  // namespace detail
}  // namespace qflow::nn::optim
