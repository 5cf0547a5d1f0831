// The end-to-end workloads of qflow-bench-e2e and how each is timed.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "qflow/core/device.h"
#include "qflow/quant/qconfig.h"

namespace qflow::bench {

struct RunSettings {
  std::string model = "resnet18";
  int64_t batch = 128;
  int warmup = 2;       // untimed runs first (allocator, OpenBLAS buffers, caches)
  int repetitions = 5;  // timed runs; the median is the figure, min/max the spread
  int64_t image_size = 32;
  int64_t in_channels = 3;
  bool fuse = true;  // fx::fuse_activations on the traced model, as qflow-train runs it
  bool simulate = false;  // deploy: the float simulation instead of the integer kernels
  // Where the model and the synthetic batch live (--device). On a GPU every timed run ends
  // with qflow::synchronize, so the clock reads the finished work, not the queued launches.
  Device device = Device::cpu();
  // After the timed runs, one more under an OpProfiler, its table on stderr (--profile-ops).
  bool profile_ops = false;
  size_t profile_rows = 25;
  // Training workloads on a GPU: the step (zero_grad, forward, loss, backward, SGD) captured as
  // one CUDA graph after the warm-up and replayed (nn::StepGraph, Note [Step graphs]).
  bool graph = false;
};

/// Timings of one workload in seconds per run, plus how many images one run handles.
struct Measurement {
  std::string workload;
  std::vector<double> seconds;
  int64_t images_per_run = 0;
  double cache_hit_rate = 0;  // of the caching allocator over the timed runs
  Device device = Device::cpu();
  // On a GPU: the device allocator's peak over the timed runs (model, optimizer state and the
  // step's activations; like torch.cuda.max_memory_allocated after reset_peak_memory_stats).
  double peak_device_mb = 0;
  // On a GPU: each timed run's seconds until fn returned, its work queued but not done. Near
  // `seconds`, the step is bound by the host (op dispatch and launches), not by the GPU.
  std::vector<double> host_seconds;
};

/// Runs `fn` settings.warmup times untimed, then settings.repetitions times timed, each timed
/// run ending when settings.device finished its work.
Measurement measure(const std::string& workload, const RunSettings& settings, int64_t images_per_run,
                    const std::function<void()>& fn);

/// One JSON line: workload, unit, median/min/max (images/s for throughput workloads, ms for
/// latency), repetitions, and the process' peak resident memory so far; on a GPU also
/// "device" and "peak_device_mb".
std::string to_json(const Measurement& m, bool latency);

// Workloads. Each builds its model with a fixed seed and random inputs/labels and, with
// settings.fuse, runs it traced and fused (fx::fuse_activations; inference also folds BN,
// fx::fuse_conv_bn). The model is built and traced on the CPU, then moved to
// settings.device with its batch (train_step, qat_train_step and inference; deploy_inference,
// the integer model, runs on the CPU).
Measurement train_step(const RunSettings& s);   // forward + cross_entropy + backward + SGD step
Measurement inference(const RunSettings& s);    // eval mode, no grad
// The quantized model: traced, rewritten by quant::quantization_aware_training (8-bit
// symmetric per-layer), trained with the same step as train_step. Workload "qat" folds BN
// with the running statistics (the default; PyTorch's ConvBn2d formulation, one conv),
// "qat-batch" with the batch ones (OneFlow's, two convs per QConvBN).
Measurement qat_train_step(const RunSettings& s, quant::BnFold bn_fold);
// Its deploy model (quant::dequantization_aware_training after one calibration batch), eval, no grad.
Measurement deploy_inference(const RunSettings& s);
double sgemm_gflops(int64_t n, int repetitions);  // cblas_sgemm n x n x n, best of repetitions

}  // namespace qflow::bench
