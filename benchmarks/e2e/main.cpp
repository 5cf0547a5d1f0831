// qflow-bench-e2e: end-to-end figures on a zoo model (default: the CIFAR ResNet18, 32x32).
//
//   qflow-bench-e2e                        # every workload, 2 threads
//   qflow-bench-e2e --workload train --batch 128 --repetitions 10
//   qflow-bench-e2e --workload qat                  # QAT training step (ResNet18, batch 128)
//   qflow-bench-e2e --workload qat-batch            # ... with OneFlow's batch-statistics BN fold
//   qflow-bench-e2e --workload deploy               # the deploy model: batch 1 latency, 128 throughput
//   qflow-bench-e2e --device cuda --workload train --batch 512   # on the GPU (train, qat, infer)
//   qflow-bench-e2e --device cuda --workload qat --profile-ops   # + host time per op (stderr)
//   qflow-bench-e2e --device cuda --workload train --graph       # the step replayed as a CUDA graph
//
// Prints one JSON line per workload (benchmarks/compare parses them). Peak memory is the
// process' high-water mark, so the driver runs each workload in its own process. With
// --device cuda the model and batch live on the GPU, every timed run ends with
// qflow::synchronize, and each line adds the device's peak allocated memory ("peak_device_mb");
// "all" then means train and infer (qat and qat-batch run when asked; deploy, the integer
// model, runs on the CPU only).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <thread>

#include "qflow/core/device_runtime.h"
#include "qflow/qflow.h"
#include "workloads.h"

int main(int argc, char** argv) {
  using namespace qflow;
  CLI::App app{"qflow-bench-e2e: training/inference throughput, latency and memory on a zoo model"};
  bench::RunSettings s;
  std::string workload = "all";
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t sgemm_size = 2048;
  std::vector<int64_t> batches;
  std::string device = "cpu";
  app.add_option("--workload", workload, "train | qat | qat-batch | infer | deploy | sgemm | all")
      ->check(CLI::IsMember({"train", "qat", "qat-batch", "infer", "deploy", "sgemm", "all"}))
      ->capture_default_str();
  app.add_option("--batch", batches, "batch sizes (default: train 32 and 128, qat and qat-batch 128, infer and deploy 1 and 128)");
  app.add_option("--model", s.model, "zoo model")->capture_default_str();
  app.add_option("--image-size", s.image_size, "input height and width")->capture_default_str();
  app.add_option("--device", device, "cpu | cuda | cuda:N: where the model and batch live (cuda: train and infer)")
      ->capture_default_str();
  app.add_option("--threads", threads, "threads for OpenMP and OpenBLAS")->capture_default_str();
  app.add_option("--warmup", s.warmup, "untimed runs before measuring")->capture_default_str();
  app.add_option("--repetitions", s.repetitions, "timed runs (median reported)")->capture_default_str();
  app.add_flag("--simulate", s.simulate, "deploy: run the float simulation of the integer model (DConv2d::set_integer(false))");
  app.add_flag("--no-fuse", [&s](int64_t) { s.fuse = false; }, "run the models as written, without fx::fuse_activations (and fx::fuse_conv_bn for infer)");
  app.add_option("--sgemm-size", sgemm_size, "square sgemm size for the machine's limit")->capture_default_str();
  app.add_flag("--profile-ops", s.profile_ops,
               "after each workload's timed runs, time one more op by op on the host and print the table to stderr");
  app.add_option("--profile-rows", s.profile_rows, "rows of the --profile-ops table")->capture_default_str();
  app.add_flag("--graph", s.graph,
               "GPU training workloads: capture the step as one CUDA graph after the warm-up and replay it "
               "(workload names end in _graph)");
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(threads);
    s.device = Device::parse(device);
    const bool gpu = !s.device.is_cpu();
    if (gpu) {
      QFLOW_CHECK(workload != "deploy",
                  "--workload deploy runs on the CPU only: the integer kernels of a deployed model are the CPU's "
                  "(run it with --device cpu)");
      // Throws saying why where there is no GPU or no CUDA backend.
      fmt::print(stderr, "qflow-bench-e2e: on {} ({})\n", device_runtime(s.device).device_name(s.device), s.device);
    }
    QFLOW_CHECK(!s.graph || (gpu && (workload == "train" || workload == "qat" || workload == "qat-batch")),
                "--graph captures a training step as a CUDA graph: it needs --device cuda and --workload train, qat "
                "or qat-batch");
    QFLOW_CHECK(!s.graph || s.warmup >= 1, "--graph needs --warmup 1 or more: the capture is made in the warm-up");
    auto for_batches = [&](std::vector<int64_t> defaults, auto&& fn) {
      for (int64_t b : batches.empty() ? defaults : batches) {
        s.batch = b;
        fn();
      }
    };
    if (workload == "sgemm" || (workload == "all" && !gpu)) {
      fmt::print(R"({{"framework": "qflow", "workload": "sgemm_{}", "unit": "GFLOP/s", "median": {:.4g}, "threads": {}}})"
                 "\n",
                 sgemm_size, bench::sgemm_gflops(sgemm_size, 5), num_threads());
      std::fflush(stdout);
    }
    if (workload == "train" || workload == "all") {
      for_batches({32, 128}, [&] { fmt::print("{}\n", bench::to_json(bench::train_step(s), false)); std::fflush(stdout); });
    }
    if (workload == "qat" || (workload == "all" && !gpu)) {
      for_batches({128}, [&] {
        fmt::print("{}\n", bench::to_json(bench::qat_train_step(s, quant::BnFold::Running), false));
        std::fflush(stdout);
      });
    }
    if (workload == "qat-batch" || (workload == "all" && !gpu)) {
      for_batches({128}, [&] {
        fmt::print("{}\n", bench::to_json(bench::qat_train_step(s, quant::BnFold::Batch), false));
        std::fflush(stdout);
      });
    }
    if (workload == "infer" || workload == "all") {
      for_batches({1, 128}, [&] {
        fmt::print("{}\n", bench::to_json(bench::inference(s), s.batch == 1));
        std::fflush(stdout);
      });
    }
    if (workload == "deploy" || (workload == "all" && !gpu)) {
      for_batches({1, 128}, [&] {
        fmt::print("{}\n", bench::to_json(bench::deploy_inference(s), s.batch == 1));
        std::fflush(stdout);
      });
    }
  } catch (const Error& e) {
    fmt::print(stderr, "qflow-bench-e2e: {}\n", e.message());
    return 1;
  }
  return 0;
}
