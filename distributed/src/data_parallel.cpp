// DistributedDataParallel; see Note [Gradient buckets].
#include "qflow/distributed/data_parallel.h"

#include <chrono>
#include <map>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/distributed/observer_sync.h"

namespace qflow::distributed {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;
  Tensor buffer;  // float32, the bucket's gradients end to end
  int64_t pending = 0;
  bool launched = false;
  Work work;
};

DistributedDataParallel::DistributedDataParallel(nn::ModulePtr module, DataParallelOptions options, ProcessGroup* group)
    : module_(std::move(module)), options_(options), group_((group ? *group : ProcessGroup::world()).duplicate()) {
  QFLOW_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  QFLOW_CHECK(options_.bucket_cap_mb >= 0, "DistributedDataParallel: bucket_cap_mb must be >= 0, got {}",
              options_.bucket_cap_mb);
  register_module("module", module_);
  train(module_->is_training());
  if (options_.sync_observers) synchronize_observers(*module_, group_);
  if (group_.size() == 1) return;  // nothing to average: no hooks, no buckets

  NoGradGuard no_grad;
  for (const auto& [name, p] : module_->named_parameters()) {
    Tensor t = p;
    group_.broadcast(t, 0, fmt::format("DistributedDataParallel: broadcast of parameter '{}'", name));
  }
  broadcast_buffers();

  for (const auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    QFLOW_CHECK(p.dtype() == DType::Float32 && p.is_contiguous(),
                "DistributedDataParallel: parameter '{}' must be contiguous float32 to be averaged, got {} of shape {}", name,
                p.dtype(), p.sizes());
    params_.push_back(p);
  }
  // Reverse registration order: the last layers' gradients arrive first.
  const double cap = options_.bucket_cap_mb * 1024 * 1024;
  slot_of_.resize(params_.size());
  std::vector<size_t> current;
  double bytes = 0;
  auto close = [&] {
    if (current.empty()) return;
    auto b = std::make_unique<Bucket>();
    int64_t offset = 0;
    for (size_t i : current) {
      slot_of_[i] = {buckets_.size(), offset};
      offset += params_[i].numel();
    }
    b->params = current;
    b->buffer = zeros({offset});
    b->pending = static_cast<int64_t>(current.size());
    buckets_.push_back(std::move(b));
    current.clear();
    bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {
    current.push_back(k);
    bytes += static_cast<double>(params_[k].nbytes());
    if (bytes >= cap) close();
  }
  close();
  arrived_.assign(params_.size(), false);
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  for (const auto& b : buckets_) stats_.bytes += static_cast<double>(b->buffer.nbytes());
  for (size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(params_[i], [this, i](const Tensor&) { on_gradient(i); }));
}

DistributedDataParallel::~DistributedDataParallel() = default;

TensorList DistributedDataParallel::forward_list(const TensorList& inputs) {
  if (is_training() && options_.broadcast_buffers) broadcast_buffers();
  return module_->call(inputs);
}

void DistributedDataParallel::broadcast_buffers() {
  if (group_.size() == 1) return;
  NoGradGuard no_grad;
  // One broadcast per dtype, not one per buffer: ResNet18 has 60 BatchNorm buffers, a QAT model
  // four more per observer, and every broadcast pays a latency.
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const Tensor& b : module_->buffers())
    if (b.defined() && b.numel() > 0) by_dtype[b.dtype()].push_back(b);
  for (auto& [dtype, buffers] : by_dtype) {
    std::vector<Tensor> flat;
    for (const Tensor& b : buffers) flat.push_back(b.reshape({-1}));
    Tensor packed = cat(flat, 0).contiguous();
    group_.broadcast(packed, 0, fmt::format("DistributedDataParallel: broadcast of the {} buffers", dtype_name(dtype)));
    int64_t offset = 0;
    for (Tensor& b : buffers) {
      const auto& shape = b.sizes();
      b.copy_(packed.narrow(0, offset, b.numel()).reshape(SymIntList(shape.begin(), shape.end())));
      offset += b.numel();
    }
  }
}

void DistributedDataParallel::on_gradient(size_t i) {
  QFLOW_CHECK(!arrived_[i],
              "DistributedDataParallel: the gradient of parameter {} (shape {}) arrived twice in one round: call "
              "synchronize_gradients() between backward passes", i, params_[i].sizes());
  const auto [bucket, offset] = slot_of_[i];
  Bucket& b = *buckets_[bucket];
  const Device device = params_[i].grad().device();
  if (b.buffer.device() != device) {
    // The module moved (Module::to) after the buckets were made: the bucket follows its
    // gradients, so a GPU's are reduced on the GPU (Note [Collectives on a device]).
    QFLOW_CHECK(b.pending == static_cast<int64_t>(b.params.size()),
                "DistributedDataParallel: the gradients of one bucket are on {} and {}: keep the module on one device",
                b.buffer.device(), device);
    b.buffer = zeros({b.buffer.numel()}, DType::Float32, device);
  }
  {
    NoGradGuard no_grad;
    b.buffer.narrow(0, offset, params_[i].numel()).copy_(params_[i].grad().reshape({-1}));
  }
  arrived_[i] = true;
  ++arrived_count_;
  --b.pending;
  launch_ready_buckets();
  if (arrived_count_ == static_cast<int64_t>(params_.size())) finish_round();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    Bucket& b = *buckets_[next_launch_];
    b.work = group_.all_reduce_async(b.buffer, ReduceOp::Sum,
                                     fmt::format("DistributedDataParallel: allreduce of gradient bucket {} of {}",
                                                 next_launch_ + 1, buckets_.size()));
    b.launched = true;
    ++next_launch_;
  }
  // MPI advances non-blocking collectives only inside its calls: give the launched ones a turn.
  for (size_t k = 0; k < next_launch_; ++k) (void)buckets_[k]->work.test();
}

void DistributedDataParallel::finish_round() {
  const auto start = std::chrono::steady_clock::now();
  NoGradGuard no_grad;
  const double scale = 1.0 / static_cast<double>(group_.size());
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    b.work.wait();
    b.buffer.mul_(scale);
    int64_t offset = 0;
    for (size_t i : b.params) {
      const int64_t n = params_[i].numel();
      const auto& shape = params_[i].sizes();
      const Tensor avg = b.buffer.narrow(0, offset, n).reshape(SymIntList(shape.begin(), shape.end()));
      if (params_[i].grad().defined()) params_[i].grad().copy_(avg);
      else params_[i].set_grad(avg.clone());
      offset += n;
    }
    b.pending = static_cast<int64_t>(b.params.size());
    b.launched = false;
  }
  arrived_.assign(params_.size(), false);
  arrived_count_ = 0;
  next_launch_ = 0;
  ++stats_.rounds;
  stats_.exposed_seconds += seconds_since(start);
}

void DistributedDataParallel::synchronize_gradients() {
  if (arrived_count_ == 0) return;  // backward finished the round, or none ran
  const auto start = std::chrono::steady_clock::now();
  // Parameters outside this backward's graph count as zero gradients on this rank.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    const auto [bucket, offset] = slot_of_[i];
    buckets_[bucket]->buffer.narrow(0, offset, params_[i].numel()).zero_();
    arrived_[i] = true;
    --buckets_[bucket]->pending;
  }
  arrived_count_ = static_cast<int64_t>(params_.size());
  launch_ready_buckets();
  stats_.exposed_seconds += seconds_since(start);
  finish_round();
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b->params);
  return out;
}

}  // namespace qflow::distributed
