// qflow-bench-conv: conv2d throughput on every convolution shape of the CIFAR-10 ResNet18, per
// pass (forward, backward data, backward weights) and per kernel: oneDNN direct, oneDNN
// Winograd (3x3 stride-1 shapes, where oneDNN implements it) and the im2col + OpenBLAS path;
// for the forward pass also the integer convolution of a deployed int8 model (quantized_conv2d:
// uint8 input with a zero point, int8 weights, per-channel scales, float32 output), and on the
// shapes that end a residual block, its two ways of adding the float32 residual before the
// ReLU: as a binary post-op into a new tensor ("int8 add") and summed into the residual itself
// ("int8 sum", quantized_conv2d_add_, what fuse_integer_layers installs).
// GFLOP/s are "effective": direct-convolution FLOPs (2 per multiply-add) over time, so a
// Winograd figure above the machine's FMA peak is possible and means fewer multiplies.
//
//   build/bin/qflow-bench-conv                  quick run, batch 16 (~1 min)
//   build/bin/qflow-bench-conv --batch=128      the training batch (~3-4 min)
//   build/bin/qflow-bench-conv --batch=128 --benchmark_filter=layer2
//   build/bin/qflow-bench-conv --threads=1      one thread for qflow, oneDNN and OpenBLAS
//   build/bin/qflow-bench-conv --no-im2col      only the oneDNN kernels
//
// After Google Benchmark's table it prints one line per shape and pass: the four GFLOP/s
// figures (int8: GOP/s), Winograd and int8 over direct, and direct as a fraction of the FMA peak
// measured first (AVX-512 or AVX2 FMAs on every thread, see fma_peak.h).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "fma_peak.h"
#include "qflow/qflow.h"

namespace {

struct ConvShape {
  const char* name;
  int64_t in, out, kernel, stride, size;  // size: input height = width
  int64_t padding() const { return kernel / 2; }
  int64_t out_size() const { return (size + 2 * padding() - kernel) / stride + 1; }
  // Multiply-adds * 2 of one pass over `batch` images (the same count for all three passes).
  double flops(int64_t batch) const {
    return 2.0 * double(batch) * double(out) * double(out_size() * out_size()) * double(in * kernel * kernel);
  }
};

// Every convolution in ResNet18 for 32x32 inputs (3x3 stem, no max pool), once per shape.
const ConvShape kShapes[] = {
    {"stem_3-64_3x3_s1_32", 3, 64, 3, 1, 32},      {"layer1_64-64_3x3_s1_32", 64, 64, 3, 1, 32},
    {"layer2_64-128_3x3_s2_32", 64, 128, 3, 2, 32}, {"layer2_128-128_3x3_s1_16", 128, 128, 3, 1, 16},
    {"layer2_64-128_1x1_s2_32", 64, 128, 1, 2, 32}, {"layer3_128-256_3x3_s2_16", 128, 256, 3, 2, 16},
    {"layer3_256-256_3x3_s1_8", 256, 256, 3, 1, 8},  {"layer3_128-256_1x1_s2_16", 128, 256, 1, 2, 16},
    {"layer4_256-512_3x3_s2_8", 256, 512, 3, 2, 8},  {"layer4_512-512_3x3_s1_4", 512, 512, 3, 1, 4},
    {"layer4_256-512_1x1_s2_8", 256, 512, 1, 2, 8},
};

enum class Pass { Forward, BackwardData, BackwardWeights };
const char* const kPassNames[] = {"forward", "bwd_data", "bwd_weights"};

struct Kernel {
  const char* name;
  qflow::ConvEngine engine;
  qflow::ConvAlgorithm algorithm;
};
const Kernel kKernels[] = {{"direct", qflow::ConvEngine::OneDNN, qflow::ConvAlgorithm::Direct},
                           {"winograd", qflow::ConvEngine::OneDNN, qflow::ConvAlgorithm::Winograd},
                           {"im2col", qflow::ConvEngine::Im2col, qflow::ConvAlgorithm::Direct}};

int64_t g_batch = 16;
bool g_im2col = true;

void BM_Conv(benchmark::State& state, const ConvShape& s, Pass pass, const Kernel& k) {
  qflow::ConvSettingsGuard settings(k.engine, k.algorithm);
  const qflow::IntList x_sizes{g_batch, s.in, s.size, s.size}, w_sizes{s.out, s.in, s.kernel, s.kernel};
  const std::string used =
      qflow::conv2d_kernel_name(x_sizes, w_sizes, qflow::DType::Float32, {s.stride}, {s.padding()});
  if (k.engine == qflow::ConvEngine::OneDNN && used != std::string("onednn-") + k.name) {
    state.SkipWithError(("oneDNN runs " + used + " here").c_str());
    return;
  }
  const qflow::Tensor x = qflow::randn(x_sizes), w = qflow::randn(w_sizes);
  const qflow::Tensor gy = qflow::randn({g_batch, s.out, s.out_size(), s.out_size()});
  for (auto _ : state) {
    if (pass == Pass::Forward) {
      benchmark::DoNotOptimize(qflow::conv2d(x, w, std::nullopt, {s.stride}, {s.padding()}).raw_data());
    } else {
      const bool data = pass == Pass::BackwardData;
      auto [gx, gw, gb] = qflow::conv2d_backward(gy, x, w, {s.stride}, {s.padding()}, {1}, 1, data, !data, false);
      benchmark::DoNotOptimize((data ? gx : gw).raw_data());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops(g_batch) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The forward pass of the deployed int8 layer: quantized input in, float32 out.
void BM_ConvInt8(benchmark::State& state, const ConvShape& s) {
  const qflow::Tensor x = qflow::randint(0, 256, {g_batch, s.in, s.size, s.size}).to(qflow::DType::UInt8);
  const qflow::Tensor w = qflow::randint(-127, 128, {s.out, s.in, s.kernel, s.kernel}).to(qflow::DType::Int8);
  const qflow::Tensor scale = qflow::rand({s.out}) * 1e-3 + 1e-4;
  for (auto _ : state)
    benchmark::DoNotOptimize(qflow::quantized_conv2d(x, w, scale, qflow::Tensor(), 3, {s.stride}, {s.padding()}).raw_data());
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops(g_batch) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// A residual block's last convolution: conv + residual, then ReLU, in one of the two forms.
void BM_ConvInt8Residual(benchmark::State& state, const ConvShape& s, bool in_place) {
  const qflow::Tensor x = qflow::randint(0, 256, {g_batch, s.in, s.size, s.size}).to(qflow::DType::UInt8);
  const qflow::Tensor w = qflow::randint(-127, 128, {s.out, s.in, s.kernel, s.kernel}).to(qflow::DType::Int8);
  const qflow::Tensor scale = qflow::rand({s.out}) * 1e-6 + 1e-7;
  // The residual as the previous integer layer writes it (the kernels' nhwc layout).
  qflow::Tensor residual = qflow::quantized_conv2d(x, w, scale, qflow::Tensor(), 3, {s.stride}, {s.padding()});
  for (auto _ : state) {
    if (in_place) {
      qflow::quantized_conv2d_add_(residual, x, w, scale, qflow::Tensor(), 3, {s.stride}, {s.padding()}, {1}, 1, true);
      benchmark::DoNotOptimize(residual.impl());
    } else {
      benchmark::DoNotOptimize(
          qflow::quantized_conv2d(x, w, scale, qflow::Tensor(), 3, {s.stride}, {s.padding()}, {1}, 1, true, residual)
              .impl());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops(g_batch) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

std::string int8_name(const ConvShape& s, const char* form = "int8") {
  return std::string(s.name) + "/forward/" + form;
}
// The shapes that end a residual block: 3x3, stride 1, as many outputs as inputs.
bool ends_a_block(const ConvShape& s) { return s.kernel == 3 && s.stride == 1 && s.in == s.out; }

std::string bench_name(const ConvShape& s, Pass pass, const Kernel& k) {
  return std::string(s.name) + "/" + kPassNames[static_cast<int>(pass)] + "/" + k.name;
}

// The usual console table, then one summary line per shape and pass.
class SummaryReporter final : public benchmark::ConsoleReporter {
 public:
  explicit SummaryReporter(double peak) : peak_(peak) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      if (auto it = r.counters.find("GFLOP/s"); it != r.counters.end()) gflops_[r.benchmark_name()] = it->second.value;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::ostream& os = GetOutputStream();
    os << fmt::format("\nconv2d, batch {}, {} threads, effective GFLOP/s; FMA peak {:.0f} GFLOP/s\n", g_batch,
                      qflow::num_threads(), peak_);
    os << fmt::format("{:<28} {:<12} {:>8} {:>9} {:>8} {:>8} {:>10} {:>10} {:>12} {:>9} {:>9}\n", "shape", "pass",
                      "direct", "winograd", "im2col", "int8", "wino/dir", "int8/dir", "direct/peak", "int8 add",
                      "int8 sum");
    auto cell = [](double v) { return v > 0 ? fmt::format("{:.0f}", v) : std::string("-"); };
    for (const ConvShape& s : kShapes)
      for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardWeights}) {
        const double d = find(bench_name(s, p, kKernels[0])), w = find(bench_name(s, p, kKernels[1])),
                     i = find(bench_name(s, p, kKernels[2])), q = p == Pass::Forward ? find(int8_name(s)) : 0.0;
        const bool forward = p == Pass::Forward;
        const double qa = forward ? find(int8_name(s, "int8_add")) : 0.0, qs = forward ? find(int8_name(s, "int8_sum")) : 0.0;
        if (d == 0 && w == 0 && i == 0 && q == 0) continue;
        auto ratio = [&](double v) { return d > 0 && v > 0 ? fmt::format("{:.2f}", v / d) : std::string("-"); };
        os << fmt::format("{:<28} {:<12} {:>8} {:>9} {:>8} {:>8} {:>10} {:>10} {:>12} {:>9} {:>9}\n", s.name,
                          kPassNames[static_cast<int>(p)], cell(d), cell(w), cell(i), cell(q), ratio(w), ratio(q),
                          d > 0 && peak_ > 0 ? fmt::format("{:.0f} %", 100 * d / peak_) : "-", cell(qa), cell(qs));
      }
  }

 private:
  double find(const std::string& name) const {
    for (const auto& [n, v] : gflops_)  // the name, or the name followed by Google Benchmark's "/min_time:..."
      if (n == name || n.rfind(name + "/", 0) == 0) return v;
    return 0.0;
  }
  double peak_;
  std::map<std::string, double> gflops_;
};

// Takes our own flags out of argv before Google Benchmark parses the rest.
void parse_flags(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) {
      g_batch = std::max<int64_t>(1, std::atoll(argv[i] + 8));
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      qflow::set_num_threads(std::max(1, std::atoi(argv[i] + 10)));
    } else if (std::strcmp(argv[i], "--no-im2col") == 0) {
      g_im2col = false;
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
}

}  // namespace

int main(int argc, char** argv) {
  parse_flags(argc, argv);
  const double peak = qflow::bench::fma_peak_gflops(qflow::num_threads());
  for (const ConvShape& s : kShapes) {
    benchmark::RegisterBenchmark(int8_name(s).c_str(), BM_ConvInt8, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.2);
    if (ends_a_block(s))
      for (const bool in_place : {false, true})
        benchmark::RegisterBenchmark(int8_name(s, in_place ? "int8_sum" : "int8_add").c_str(), BM_ConvInt8Residual, s,
                                     in_place)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.2);
    for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardWeights})
      for (const Kernel& k : kKernels) {
        if (!g_im2col && k.engine == qflow::ConvEngine::Im2col) continue;
        benchmark::RegisterBenchmark(bench_name(s, p, k).c_str(), BM_Conv, s, p, k)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.2);
      }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter(peak);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
