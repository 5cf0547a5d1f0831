#include "workloads.h"

#include <cblas.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "qflow/core/device_runtime.h"
#include "qflow/fx/fx.h"
#include "qflow/nn/step_graph.h"
#include "qflow/qflow.h"

namespace qflow::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of fn() until `device` finished the work it queued (the CPU: when fn returns), and
// (into *queued) until fn returned.
double seconds_of(const std::function<void()>& fn, Device device = Device::cpu(), double* queued = nullptr) {
  const auto start = Clock::now();
  fn();
  if (queued) *queued = std::chrono::duration<double>(Clock::now() - start).count();
  synchronize(device);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux reports KiB
}

nn::ModulePtr make_model(const RunSettings& s) {
  manual_seed(0);
  return models::create(s.model, {.num_classes = 10, .in_channels = s.in_channels, .image_size = s.image_size});
}

// On the CPU: the tracing inputs and the quantized workloads' batches. (randn draws on the
// CPU whatever the device, so the numbers are the same on both.)
Tensor random_images(const RunSettings& s, int64_t batch) {
  return randn({batch, s.in_channels, s.image_size, s.image_size});
}

// The timed batch, on the run's device.
Tensor device_images(const RunSettings& s, int64_t batch) {
  return randn({batch, s.in_channels, s.image_size, s.image_size}, DType::Float32, nullptr, s.device);
}

// A model built (and traced) on the CPU, moved to the run's device.
nn::ModulePtr on_device(nn::ModulePtr model, const RunSettings& s) {
  if (!s.device.is_cpu()) model->to(s.device);
  return model;
}

// forward + cross_entropy + backward + SGD step of `model`, timed as workload `name`.
Measurement sgd_steps(const std::string& name, nn::Module& model, const RunSettings& s) {
  model.train();
  nn::optim::SGD sgd(model.parameters(), nn::optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4});
  const Tensor images = device_images(s, s.batch);
  const Tensor labels = s.device.is_cpu() ? randint(0, 10, {s.batch}) : randint(0, 10, {s.batch}).to(s.device);
  auto step = [&](const std::vector<Tensor>& in) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(model(in[0]), in[1]);
    loss.backward();
    sgd.step();
    return std::vector<Tensor>{loss};
  };
  const std::string workload = fmt::format("{}_{}_b{}{}", name, s.model, s.batch, s.graph ? "_graph" : "");
  if (!s.graph) return measure(workload, s, s.batch, [&] { (void)step({images, labels}); });
  // The warm-up of measure() makes the StepGraph's eager calls and its capture.
  nn::StepGraph graph(s.device, step, {.warmup = std::max(0, s.warmup - 1)});
  return measure(workload, s, s.batch, [&] { (void)graph({images, labels}); });
}

// The QAT GraphModule of the zoo model (8-bit symmetric google per-layer, the default QConfig).
std::shared_ptr<fx::GraphModule> make_qat_model(const RunSettings& s, std::shared_ptr<fx::GraphModule>* float_gm,
                                                quant::BnFold bn_fold = quant::QConfig{}.bn_fold) {
  const Tensor example = random_images(s, 1);
  auto gm = fx::symbolic_trace(make_model(s), example);
  auto qat = quant::quantization_aware_training(*gm, example, {.bn_fold = bn_fold});
  if (float_gm != nullptr) *float_gm = gm;
  return qat;
}


}  // namespace

Measurement measure(const std::string& workload, const RunSettings& settings, int64_t images_per_run,
                    const std::function<void()>& fn) {
  const Device device = settings.device;
  for (int i = 0; i < settings.warmup; ++i) fn();
  synchronize(device);  // the warm-up's queued work is not the first timed run's
  Measurement m{workload, {}, images_per_run};
  m.device = device;
  reset_allocator_stats();
  if (!device.is_cpu()) device_runtime(device).reset_peak_memory_stats(device);
  for (int i = 0; i < settings.repetitions; ++i) {
    double queued = 0;
    m.seconds.push_back(seconds_of(fn, device, &queued));
    m.host_seconds.push_back(queued);
  }
  if (settings.profile_ops) {  // one more run, timed op by op on the host (Note [Op profiler])
    OpProfiler profiler;
    fn();
    synchronize(device);
    fmt::print(stderr, "qflow-bench-e2e: host time per op of one {} run ({}):\n{}", workload, device,
               profiler.table(settings.profile_rows));
  }
  m.cache_hit_rate = allocator_stats().hit_rate();
  if (!device.is_cpu())
    m.peak_device_mb = static_cast<double>(device_runtime(device).memory_stats(device).peak_allocated) / (1024.0 * 1024.0);
  return m;
}

std::string to_json(const Measurement& m, bool latency) {
  std::vector<double> v = m.seconds;
  std::sort(v.begin(), v.end());
  const double median = median_of(v);
  // Latency in ms (lower is better); throughput in images/s (higher is better), so the
  // fastest run is the max of the throughput figures.
  auto value = [&](double sec) { return latency ? sec * 1e3 : static_cast<double>(m.images_per_run) / sec; };
  const double lo = latency ? value(v.front()) : value(v.back());
  const double hi = latency ? value(v.back()) : value(v.front());
  // The CPU's line is as before; a GPU's adds where it ran and its peak device memory.
  const std::string device =
      m.device.is_cpu() ? std::string()
                        : fmt::format(R"(, "device": "{}", "device_name": "{}", "peak_device_mb": {:.1f}, )"
                                      R"("step_ms": {:.4g}, "host_queue_ms": {:.4g})",
                                      m.device, device_runtime(m.device).device_name(m.device), m.peak_device_mb,
                                      median * 1e3, median_of(m.host_seconds) * 1e3);
  return fmt::format(
      R"({{"framework": "qflow", "workload": "{}", "unit": "{}", "median": {:.4g}, "min": {:.4g}, "max": {:.4g}, )"
      R"("repetitions": {}, "peak_rss_mb": {:.1f}, "cache_hit_rate": {:.3f}, "threads": {}{}}})",
      m.workload, latency ? "ms" : "images/s", value(median), lo, hi, v.size(), peak_rss_mb(), m.cache_hit_rate,
      num_threads(), device);
}

namespace {

// The model as a user runs it: with s.fuse traced and fused (in eval also BN folded).
nn::ModulePtr runnable(const RunSettings& s, nn::ModulePtr model, bool eval) {
  if (eval) model->eval();
  if (!s.fuse) return model;
  auto gm = fx::symbolic_trace(model, random_images(s, 1));
  if (eval) gm = fx::fuse_conv_bn(*gm);
  fx::fuse_activations(*gm);
  return gm;
}

}  // namespace

Measurement train_step(const RunSettings& s) {
  return sgd_steps("train", *on_device(runnable(s, make_model(s), false), s), s);
}

Measurement qat_train_step(const RunSettings& s, quant::BnFold bn_fold) {
  auto qat = make_qat_model(s, nullptr, bn_fold);
  if (s.fuse) fx::fuse_activations(*qat);  // as qflow-train: QConvBN+ReLU, add+ReLU
  on_device(qat, s);  // built on the CPU, trained where qflow-train trains it
  return sgd_steps(bn_fold == quant::BnFold::Batch ? "qat-batch" : "qat", *qat, s);
}

Measurement deploy_inference(const RunSettings& s) {
  std::shared_ptr<fx::GraphModule> float_gm;
  auto qat = make_qat_model(s, &float_gm);
  quant::calibrate(*qat, std::vector<Tensor>{random_images(s, 8)});
  auto deploy = quant::dequantization_aware_training(*float_gm, *qat, random_images(s, 1), {});
  deploy->eval();
  if (s.simulate) {
    for (const auto& [path, m] : deploy->named_modules()) {
      if (auto d = std::dynamic_pointer_cast<quant::DConv2d>(m)) d->set_integer(false);
      if (auto d = std::dynamic_pointer_cast<quant::DLinear>(m)) d->set_integer(false);
    }
  }
  // ReLU and residual adds as post-ops, integers written for the next layer (the float
  // simulation: fx::fuse_activations's fusions only).
  if (s.fuse) quant::fuse_integer_layers(*deploy);
  const Tensor images = random_images(s, s.batch);
  NoGradGuard no_grad;
  return measure(fmt::format("deploy_{}_b{}", s.model, s.batch), s, s.batch, [&] { (void)(*deploy)(images); });
}

Measurement inference(const RunSettings& s) {
  nn::ModulePtr model = on_device(runnable(s, make_model(s), true), s);
  const Tensor images = device_images(s, s.batch);
  NoGradGuard no_grad;
  return measure(fmt::format("infer_{}_b{}", s.model, s.batch), s, s.batch, [&] { (void)(*model)(images); });
}

double sgemm_gflops(int64_t n, int repetitions) {
  qflow::use_best_openblas_kernels();  // the kernels qflow's own GEMMs use (Note [OpenBLAS kernel selection])
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  const auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.0f, a.data(), static_cast<int>(n), b.data(), static_cast<int>(n), 0.0f,
                c.data(), static_cast<int>(n));
  };
  run();
  double best = 1e30;
  for (int i = 0; i < repetitions; ++i) best = std::min(best, seconds_of(run));
  return 2.0 * static_cast<double>(n * n * n) / best * 1e-9;
}

}  // namespace qflow::bench
