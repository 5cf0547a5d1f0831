// qflow-bench-ddp: data-parallel training throughput and its communication, ResNet18 on
// 3x32x32 images (10 classes), one random batch per process drawn once.
//
//   qflow-bench-ddp                                   # one process: the baseline
//   mpirun -np 2 qflow-bench-ddp --json ddp.json      # two (as root: --allow-run-as-root --oversubscribe)
//
// Reports from rank 0: global images/s and step time (median and min-max of the timed steps),
// the communication each step waited for (DataParallelStats::exposed_seconds), the standalone
// time of one blocking allreduce of the whole gradient measured after training (median) with
// its bandwidth, the overlap 1 − exposed/standalone, and the latency of a 4-byte allreduce.
// benchmarks/distributed/scaling runs it in rounds and projects to more machines.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>

#include "allreduce_timing.h"
#include "ddp_steps.h"
#include "qflow/distributed/process_group.h"
#include "qflow/qflow.h"
#include "summary.h"

namespace {

using namespace qflow;
using bench::Spread;
using bench::spread_of;

struct Report {
  int world = 1, threads = 1;
  bench::StepSettings settings;
  bench::StepTimings timings;
  Spread allreduce, latency;  // seconds; zero for a world of one (nothing to communicate)
};

// Ring allreduce moves 2(N−1)/N of the data through each link (the "bus bandwidth" of
// nccl-tests), so the figure is comparable across world sizes and with a link's speed.
double bus_bandwidth(const Report& r) {
  if (r.world < 2 || r.allreduce.median <= 0) return 0;
  return 2.0 * (r.world - 1) / r.world * r.timings.grad_bytes / r.allreduce.median;
}

double overlap(const Report& r) {
  if (r.world < 2 || r.allreduce.median <= 0) return 0;
  return std::clamp(1.0 - spread_of(r.timings.exposed).median / r.allreduce.median, 0.0, 1.0);
}

// "[a, b, ...]" of `values` scaled by `scale`.
std::string json_list(const std::vector<double>& values, double scale) {
  std::string out;
  for (double v : values) out += fmt::format("{}{:.5g}", out.empty() ? "" : ", ", v * scale);
  return "[" + out + "]";
}

std::string to_json(const Report& r) {
  std::vector<double> before_end;  // per parameter, median over the steps
  for (const auto& samples : r.timings.before_end) before_end.push_back(spread_of(samples).median);
  const Spread step = spread_of(r.timings.step);
  const double images = static_cast<double>(r.world * r.settings.batch);
  return fmt::format(
      R"({{"world": {}, "threads": {}, "batch": {}, "global_batch": {}, "steps": {}, "bucket_mb": {}, )"
      R"("images_per_s": {:.5g}, "images_per_s_min": {:.5g}, "images_per_s_max": {:.5g}, )"
      R"("step_ms": {:.5g}, "step_ms_min": {:.5g}, "step_ms_max": {:.5g}, "broadcast_ms": {:.4g}, "backward_ms": {:.5g}, )"
      R"("exposed_ms": {:.4g}, "window_ms": {:.5g}, "grad_bytes": {:.0f}, "buckets": {}, "buffers": {}, )"
      R"("allreduce_ms": {:.4g}, "allreduce_ms_min": {:.4g}, "allreduce_ms_max": {:.4g}, "bus_gbit_per_s": {:.4g}, )"
      R"("overlap": {:.4f}, "latency_us": {:.4g}, "cpu_share": {:.3f}, "param_bytes": {}, "before_end_ms": {}}})",
      r.world, r.threads, r.settings.batch, r.world * r.settings.batch, r.settings.steps, r.settings.bucket_mb,
      images / step.median, images / step.max, images / step.min, step.median * 1e3, step.min * 1e3, step.max * 1e3,
      spread_of(r.timings.broadcast).median * 1e3, spread_of(r.timings.backward).median * 1e3,
      spread_of(r.timings.exposed).median * 1e3, spread_of(r.timings.window).median * 1e3, r.timings.grad_bytes,
      r.timings.buckets, r.timings.buffers, r.allreduce.median * 1e3, r.allreduce.min * 1e3, r.allreduce.max * 1e3,
      bus_bandwidth(r) * 8e-9, overlap(r), r.latency.median * 1e6, r.timings.cpu_share, json_list(r.timings.param_bytes, 1),
      json_list(before_end, 1e3));
}

void print_summary(const Report& r) {
  const Spread step = spread_of(r.timings.step);
  const double images = static_cast<double>(r.world * r.settings.batch);
  fmt::print("qflow-bench-ddp: ResNet18 3x32x32, {} process(es) x {} thread(s), batch {} per process (global {}), {} timed steps\n",
             r.world, r.threads, r.settings.batch, r.world * r.settings.batch, r.settings.steps);
  fmt::print("  throughput     {:.1f} images/s ({:.1f}-{:.1f})\n", images / step.median, images / step.max, images / step.min);
  fmt::print("  step           {:.1f} ms ({:.1f}-{:.1f}); backward compute {:.1f} ms; buffer broadcast {:.2f} ms\n",
             step.median * 1e3, step.min * 1e3, step.max * 1e3, spread_of(r.timings.backward).median * 1e3,
             spread_of(r.timings.broadcast).median * 1e3);
  fmt::print("  CPU share      {:.2f} of {} thread(s) per process over the timed steps (below 1: other programs ran)\n",
             r.timings.cpu_share, r.threads);
  fmt::print("  gradients      {:.2f} MB in {} bucket(s) of <= {} MiB; {} buffers\n", r.timings.grad_bytes / 1e6, r.timings.buckets,
             r.settings.bucket_mb, r.timings.buffers);
  if (r.world < 2) {
    fmt::print("  communication  none (a world of one)\n");
    return;
  }
  fmt::print("  exposed comm   {:.2f} ms/step (waited for after backward's compute); window {:.1f} ms after the first bucket\n",
             spread_of(r.timings.exposed).median * 1e3, spread_of(r.timings.window).median * 1e3);
  fmt::print("  allreduce      {:.2f} ms standalone ({:.2f}-{:.2f}) for the whole gradient: {:.2f} Gbit/s bus bandwidth\n",
             r.allreduce.median * 1e3, r.allreduce.min * 1e3, r.allreduce.max * 1e3, bus_bandwidth(r) * 8e-9);
  fmt::print("  overlap        {:.0f} % of the standalone allreduce hidden behind backward\n", overlap(r) * 100);
  fmt::print("  latency        {:.2f} us per 4-byte allreduce\n", r.latency.median * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qflow-bench-ddp: ResNet18 (CIFAR size) training under DistributedDataParallel — images/s, "
               "exposed communication, standalone allreduce time and bandwidth. Run plain or under mpirun."};
  Report r;
  int repetitions = 10;
  std::string json_path;
  app.add_option("--batch-size", r.settings.batch, "images per process and step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--steps", r.settings.steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", r.settings.warmup, "untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--threads", r.threads, "threads per process (OpenMP and OpenBLAS)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--bucket-mb", r.settings.bucket_mb, "gradient bucket size in MiB (0: one bucket per parameter)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--allreduce-repetitions", repetitions, "standalone allreduces of the whole gradient (median reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--no-fuse", [&r](int64_t) { r.settings.fuse = false; }, "step the model as written, without fx::fuse_activations");
  app.add_option("--json", json_path, "also write the figures as one JSON object to this file (rank 0)");
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(r.threads);
    auto& world = distributed::ProcessGroup::world();
    r.world = world.size();
    r.timings = bench::run_ddp_steps(r.settings, world);
    if (r.world > 1) {
      r.allreduce = spread_of(bench::time_all_reduce(world, r.timings.grad_bytes, repetitions));
      r.latency = spread_of(bench::time_small_all_reduce(world, 21, 200));
    }
    if (!world.is_root()) return 0;
    print_summary(r);
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << to_json(r) << '\n';
      QFLOW_CHECK(out.good(), "cannot write {}", json_path);
    }
  } catch (const Error& e) {
    if (distributed::ProcessGroup::world().size() > 1) distributed::abort("qflow-bench-ddp: " + e.message());
    fmt::print(stderr, "qflow-bench-ddp: {}\n", e.message());
    return 1;
  }
  return 0;
}
