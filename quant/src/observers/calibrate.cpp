#include "qflow/quant/calibrate.h"

#include "qflow/autograd/grad_mode.h"
#include "qflow/quant/observer.h"

namespace qflow::quant {

ModeGuard::ModeGuard(nn::Module& root) {
  for (const nn::ModulePtr& m : root.modules()) modes_.emplace_back(m, m->is_training());
}

ModeGuard::~ModeGuard() {
  for (const auto& [m, training] : modes_) m->train(training);  // pre-order: deeper flags win
}

CalibrationSession::CalibrationSession(nn::Module& model) : model_(model), modes_(model) {
  model_.eval();
  for (const nn::ModulePtr& m : model_.modules())
    if (dynamic_cast<Observer*>(m.get()) != nullptr) m->train();
}

void CalibrationSession::observe(const Tensor& images) {
  NoGradGuard no_grad;
  (void)model_(images);
  ++batches_;
}

void CalibrationSession::observe(const TensorList& inputs) {
  NoGradGuard no_grad;
  (void)model_.call(inputs);
  ++batches_;
}

}  // namespace qflow::quant
