#include "train_step.h"

#include <cmath>
#include <filesystem>

#include "qflow/nn/anomaly.h"

namespace qflow::tools {

GraphMode parse_graph_mode(const std::string& text) {
  if (text == "off") return GraphMode::Off;
  if (text == "auto") return GraphMode::Auto;
  if (text == "on") return GraphMode::On;
  QFLOW_FAIL("--cuda-graphs: expected auto, on or off, got '{}'", text);
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  return logits.argmax(1).eq(labels).sum().item<int64_t>();
}

namespace {

// Note [Non-finite training]
// A NaN/Inf loss turns every weight into NaN at the optimizer step, and a run that goes on
// trains garbage and saves it over its good checkpoints. qflow-train stops instead: before
// the step when the loss is not finite, and after it when the step made a weight non-finite
// (gradients or the update overflowed while the loss was still finite). Nothing non-finite is
// ever saved, and the message names the step and points to --detect-anomaly, which finds the
// module and op. Checking the weights costs one pass over the parameters per step.
std::string saved_state(const std::string& dir) {
  const std::string last = (std::filesystem::path(dir) / "last.safetensors").string();
  return std::filesystem::exists(last) ? last + " holds the last saved state" : "no checkpoint was saved before";
}

constexpr const char* kRerun = "Rerun with --detect-anomaly to find the module and op where the first NaN/Inf appears";

void check_finite_loss(double loss, const std::string& dir) {
  if (std::isfinite(loss)) return;
  QFLOW_FAIL("the training loss is {}; stopped before the optimizer step, so no weight was updated with it ({}). {}",
             std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf", saved_state(dir), kRerun);
}

// One float64 sum over every floating parameter on the model's device: a NaN or Inf anywhere
// makes it non-finite (undefined for a model without floating parameters).
Tensor parameter_sum(const nn::Module& model) {
  NoGradGuard no_grad;
  Tensor total;
  for (const auto& [name, p] : model.named_parameters()) {
    if (!is_floating(p.dtype()) || p.numel() == 0) continue;
    const Tensor s = p.detach().sum().to(DType::Float64);
    total = total.defined() ? total + s : s;
  }
  return total;
}

// Names the first non-finite parameter (copied to the CPU) and stops the run.
void fail_on_non_finite_weights(const nn::Module& model, double loss, const std::string& dir) {
  for (const auto& [name, p] : model.named_parameters()) {
    const std::string bad = autograd::describe_non_finite(p.device().is_cpu() ? p : p.detach().cpu());
    if (bad.empty()) continue;
    QFLOW_FAIL("the optimizer step made parameter '{}' non-finite ({}) while the loss was finite ({:.6g}): the gradients "
               "or the update overflowed; stopped without saving it ({}). {}", name, bad, loss, saved_state(dir), kRerun);
  }
}

void check_finite_weights(const nn::Module& model, double loss, const std::string& dir) {
  if (!model.device().is_cpu()) {
    // On a device, one sum and one read; only when it is not finite (or finite values
    // overflowed it) are the parameters copied to the CPU to name the first bad one.
    const Tensor total = parameter_sum(model);
    if (!total.defined() || std::isfinite(total.item<double>())) return;
  }
  fail_on_non_finite_weights(model, loss, dir);
}

}  // namespace

TrainStep::TrainStep(nn::Module& step_model, nn::Module& model, nn::optim::Optimizer& optimizer,
                     distributed::DistributedDataParallel& ddp, std::string checkpoint_dir, GraphMode mode,
                     Device device, int64_t batch_size)
    : step_model_(step_model), model_(model), optimizer_(optimizer), ddp_(ddp),
      checkpoint_dir_(std::move(checkpoint_dir)), mode_(mode), batch_size_(batch_size) {
  if (mode == GraphMode::Off || device.is_cpu()) return;
  forward_ = std::make_unique<nn::StepGraph>(
      device,
      [this](const std::vector<Tensor>& in) {
        optimizer_.zero_grad();
        const Tensor logits = step_model_(in[0]);
        Tensor loss = cross_entropy(logits, in[1]);
        loss.backward();
        const Tensor correct = logits.detach().argmax(1).eq(in[1]).sum();
        return std::vector<Tensor>{loss.detach(), correct};
      },
      nn::StepGraph::Options{.warmup = 1});
  update_ = std::make_unique<nn::StepGraph>(
      device,
      [this](const std::vector<Tensor>&) {
        optimizer_.step();
        return std::vector<Tensor>{parameter_sum(model_)};
      },
      nn::StepGraph::Options{.warmup = 1});
  fmt::print("qflow-train: training steps of {} images run as CUDA graphs, captured once per epoch (--cuda-graphs {})\n",
             batch_size, mode == GraphMode::On ? "on" : "auto");
}

void TrainStep::new_epoch() {
  if (!forward_) return;
  forward_->reset();
  update_->reset();
}

StepResult TrainStep::operator()(const Tensor& images, const Tensor& labels) {
  if (forward_ && images.sizes()[0] == batch_size_) return graphed(images, labels);
  return eager(images, labels);
}

StepResult TrainStep::eager(const Tensor& images, const Tensor& labels) {
  const Tensor logits = step_model_(images);
  const Tensor loss = cross_entropy(logits, labels);
  StepResult r;
  r.loss = loss.item<double>();
  check_finite_loss(r.loss, checkpoint_dir_);
  optimizer_.zero_grad();
  loss.backward();
  ddp_.synchronize_gradients();
  optimizer_.step();
  check_finite_weights(model_, r.loss, checkpoint_dir_);
  r.correct = count_correct(logits.detach(), labels);
  return r;
}

void TrainStep::give_up_graphs(const Error& why) {
  if (mode_ == GraphMode::On)
    QFLOW_FAIL("--cuda-graphs on: this training step cannot run as a CUDA graph: {} (--cuda-graphs auto runs it "
               "eagerly)", why.message());
  fmt::print("qflow-train: CUDA graphs off, every step runs eagerly: {}\n", why.message());
  std::fflush(stdout);
  forward_.reset();
  update_.reset();
}

StepResult TrainStep::graphed(const Tensor& images, const Tensor& labels) {
  const bool capture_forward = forward_->captures_next();
  std::vector<Tensor> out;
  try {
    out = (*forward_)({images, labels});
  } catch (const Error& e) {
    if (!capture_forward) throw;
    give_up_graphs(e);
    return eager(images, labels);  // nothing of the failed capture ran on the device
  }
  StepResult r;
  r.loss = out[0].item<double>();
  check_finite_loss(r.loss, checkpoint_dir_);  // before the update, as the eager step
  r.correct = out[1].item<int64_t>();
  const bool capture_update = update_->captures_next();
  std::vector<Tensor> sum;
  try {
    sum = (*update_)({});
  } catch (const Error& e) {
    if (!capture_update) throw;
    give_up_graphs(e);  // the gradients are in place: the update alone, eagerly
    optimizer_.step();
    check_finite_weights(model_, r.loss, checkpoint_dir_);
    return r;
  }
  if (sum[0].defined() && !std::isfinite(sum[0].item<double>())) fail_on_non_finite_weights(model_, r.loss, checkpoint_dir_);
  return r;
}

}  // namespace qflow::tools
