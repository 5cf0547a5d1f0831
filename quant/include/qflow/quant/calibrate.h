#pragma once
// Post-training calibration: run a few batches through a quantization-ready model so its
// observers record activation and weight ranges, without training anything.
//
//   auto ptq = quant::prepare_ptq(*gm, example, qconfig);
//   quant::calibrate(*ptq, loader, 16);                 // data::DataLoader (uses batch.images)
//   quant::calibrate(*ptq, std::vector<Tensor>{a, b});  // or plain input tensors
//   quant::calibrate(*ptq, std::vector<TensorList>{{a, b}});  // several inputs per batch
//
// During calibration the model runs in eval mode (BatchNorm uses its running statistics,
// Dropout is off) with grad mode off, except the observers, which are switched to training
// mode so they record (frozen observers stay frozen). Every module's mode is restored after.
#include <cstdint>
#include <utility>
#include <vector>

#include "qflow/nn/module.h"

namespace qflow::quant {

/// Remembers the train/eval flag of every module of a tree and restores each one when it
/// dies (Module::train is recursive, so restoring in pre-order puts every flag back).
class ModeGuard {
 public:
  explicit ModeGuard(nn::Module& root);
  ~ModeGuard();
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  std::vector<std::pair<nn::ModulePtr, bool>> modes_;
};

/// The calibration mode of the header comment, for as long as it lives.
class CalibrationSession {
 public:
  explicit CalibrationSession(nn::Module& model);
  /// One forward pass of `images` (no grad) so the observers record its ranges.
  void observe(const Tensor& images);
  /// The same for a model with several inputs (one tensor each).
  void observe(const TensorList& inputs);
  int64_t batches() const { return batches_; }

 private:
  nn::Module& model_;
  ModeGuard modes_;
  int64_t batches_ = 0;
};

/// Runs up to `max_batches` batches of `batches` (all of them when negative) through `model`
/// in calibration mode; returns how many ran. `batches` is any range of Tensors, of
/// TensorLists (models with several inputs) or of structs with an `images` member
/// (data::DataLoader's batches).
template <class Batches>
int64_t calibrate(nn::Module& model, Batches&& batches, int64_t max_batches = -1) {
  CalibrationSession session(model);
  for (auto&& b : batches) {
    if (max_batches >= 0 && session.batches() >= max_batches) break;
    if constexpr (requires { b.images; }) session.observe(b.images);
    else session.observe(b);
  }
  return session.batches();
}

}  // namespace qflow::quant
