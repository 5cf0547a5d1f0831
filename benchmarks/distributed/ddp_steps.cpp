#include "ddp_steps.h"

#include <time.h>

#include <chrono>

#include "qflow/distributed/data_parallel.h"
#include "qflow/fx/fx.h"
#include "qflow/qflow.h"

namespace qflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

StepTimings run_ddp_steps(const StepSettings& s, distributed::ProcessGroup& world) {
  manual_seed(0);  // the same model everywhere (DistributedDataParallel broadcasts rank 0's anyway)
  nn::ModulePtr model = models::create("resnet18", {.num_classes = 10, .in_channels = 3, .image_size = 32});
  model->train();
  // Every gradient's arrival, stamped before DistributedDataParallel's own hook runs (hooks run
  // in registration order, Note [Post-accumulate-grad hooks]): so the last one marks the end of
  // backward's compute, not the end of its wait for communication.
  const std::vector<Tensor> params = model->parameters();
  std::vector<Clock::time_point> arrival(params.size());
  std::vector<autograd::HookHandle> stamps;
  for (size_t i = 0; i < params.size(); ++i)
    stamps.push_back(autograd::register_post_accumulate_grad_hook(params[i], [&arrival, i](const Tensor&) { arrival[i] = Clock::now(); }));

  distributed::DistributedDataParallel ddp(model, {.bucket_cap_mb = s.bucket_mb}, &world);
  nn::ModulePtr step_model = model;
  if (s.fuse) {
    auto gm = fx::symbolic_trace(model, zeros({1, 3, 32, 32}));
    fx::fuse_activations(*gm);
    step_model = gm;
  }
  nn::optim::SGD sgd(model->parameters(), {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4});
  manual_seed(1 + world.rank());  // each rank its own share of the global batch
  const Tensor images = randn({s.batch, 3, 32, 32});
  const Tensor labels = randint(0, 10, {s.batch});

  StepTimings t;
  // What DistributedDataParallel allreduces; a world of one has no buckets, so count them.
  t.grad_bytes = ddp.stats().bytes;
  if (t.grad_bytes == 0)
    for (const Tensor& p : params) t.grad_bytes += static_cast<double>(p.nbytes());
  for (const Tensor& p : params) t.param_bytes.push_back(static_cast<double>(p.nbytes()));
  t.before_end.resize(params.size());
  t.buckets = ddp.stats().buckets;
  for (const auto& [name, b] : model->named_buffers()) t.buffers += b.defined() && b.numel() > 0;
  const auto layout = ddp.bucket_layout();

  Clock::time_point timed_start;
  double cpu_start = 0;
  for (int i = 0; i < s.warmup + s.steps; ++i) {
    if (i == s.warmup) {
      world.barrier("qflow-bench-ddp: start of the timed steps");
      timed_start = Clock::now();
      cpu_start = cpu_seconds();
    }
    const double exposed_before = ddp.stats().exposed_seconds;
    const auto start = Clock::now();
    ddp.broadcast_buffers();  // as qflow-train: every rank normalizes with rank 0's statistics
    const auto forward = Clock::now();
    sgd.zero_grad();
    const Tensor loss = cross_entropy((*step_model)(images), labels);
    const auto backward = Clock::now();
    loss.backward();
    ddp.synchronize_gradients();
    sgd.step();
    const auto end = Clock::now();
    if (i < s.warmup) continue;
    Clock::time_point last = arrival.front();
    for (const auto& a : arrival) last = std::max(last, a);
    t.step.push_back(seconds(start, end));
    t.broadcast.push_back(seconds(start, forward));
    t.backward.push_back(seconds(backward, last));
    t.exposed.push_back(ddp.stats().exposed_seconds - exposed_before);
    for (size_t p = 0; p < params.size(); ++p) t.before_end[p].push_back(seconds(arrival[p], last));
    if (!layout.empty()) {  // the first bucket is complete when its last gradient arrived
      Clock::time_point first_ready = arrival[layout.front().front()];
      for (size_t p : layout.front()) first_ready = std::max(first_ready, arrival[p]);
      t.window.push_back(seconds(first_ready, last));
    }
  }
  t.cpu_share = (cpu_seconds() - cpu_start) / (seconds(timed_start, Clock::now()) * num_threads());
  t.cpu_share = world.sum(t.cpu_share, "qflow-bench-ddp: CPU share") / world.size();  // mean over the ranks
  return t;
}

}  // namespace qflow::bench
