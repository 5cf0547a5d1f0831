// qflow-bench-conv: conv2d forward and backward throughput on every convolution shape of the
// CIFAR-10 ResNet18, next to a bare cblas_sgemm of the GEMM the shape lowers to
// (M = out channels, K = in channels * kH * kW, N = batch * Ho * Wo; see Note [Convolution
// as GEMM]). Backward computes grad input and grad weight: twice the forward FLOPs.
//
//   build/bin/qflow-bench-conv                  quick run, batch 16 (~15 s)
//   build/bin/qflow-bench-conv --batch=128      the training batch (~1-2 min)
//   build/bin/qflow-bench-conv --batch=128 --benchmark_filter=layer2
//   build/bin/qflow-bench-conv --threads=1     one thread for kernels and OpenBLAS
// On CPUs newer than the system OpenBLAS, export OPENBLAS_CORETYPE (the run prints a warning
// when OpenBLAS fell back to its generic kernels).
//
// After Google Benchmark's table it prints one summary line per shape:
// forward / backward GFLOP/s, the sgemm GFLOP/s, and conv as a fraction of that sgemm.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "qflow/qflow.h"

namespace {

struct ConvShape {
  const char* name;
  int64_t in, out, kernel, stride, size;  // size: input height = width
  int64_t padding() const { return kernel / 2; }
  int64_t out_size() const { return (size + 2 * padding() - kernel) / stride + 1; }
  // Multiply-adds * 2 of one forward pass over `batch` images.
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

int64_t g_batch = 16;

void set_gflops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ConvForward(benchmark::State& state, const ConvShape& s) {
  const qflow::Tensor x = qflow::randn({g_batch, s.in, s.size, s.size});
  const qflow::Tensor w = qflow::randn({s.out, s.in, s.kernel, s.kernel});
  for (auto _ : state)
    benchmark::DoNotOptimize(qflow::conv2d(x, w, std::nullopt, {s.stride}, {s.padding()}).raw_data());
  set_gflops(state, s.flops(g_batch));
}

void BM_ConvBackward(benchmark::State& state, const ConvShape& s) {
  const qflow::Tensor x = qflow::randn({g_batch, s.in, s.size, s.size});
  const qflow::Tensor w = qflow::randn({s.out, s.in, s.kernel, s.kernel});
  const qflow::Tensor gy = qflow::randn({g_batch, s.out, s.out_size(), s.out_size()});
  for (auto _ : state) {
    auto [gx, gw, gb] = qflow::conv2d_backward(gy, x, w, {s.stride}, {s.padding()}, {1}, 1, true, true, false);
    benchmark::DoNotOptimize(gx.raw_data());
    benchmark::DoNotOptimize(gw.raw_data());
  }
  set_gflops(state, 2.0 * s.flops(g_batch));
}

// The forward GEMM of the shape with N capped at 16k columns (throughput has saturated by
// then, and batch 128 would otherwise need a 300 MB operand).
void BM_Sgemm(benchmark::State& state, const ConvShape& s) {
  const int64_t m = s.out, k = s.in * s.kernel * s.kernel;
  const int64_t n = std::min<int64_t>(g_batch * s.out_size() * s.out_size(), 16384);
  const qflow::Tensor a = qflow::randn({m, k}), b = qflow::randn({k, n});
  qflow::Tensor c = qflow::empty({m, n});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), 1.0f, a.data_ptr<float>(),
                blasint(k), b.data_ptr<float>(), blasint(n), 0.0f, c.data_ptr<float>(), blasint(n));
    benchmark::ClobberMemory();
  }
  set_gflops(state, 2.0 * double(m) * double(n) * double(k));
}

// The usual console table, plus a per-shape summary of the three GFLOP/s figures.
class SummaryReporter final : public benchmark::ConsoleReporter {
 public:
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
    os << "\nconv2d on OpenBLAS (" << openblas_get_corename() << " kernels), batch " << g_batch << ", "
       << qflow::num_threads() << " threads (GFLOP/s)\n";
    os << fmt::format("{:<28} {:>9} {:>9} {:>9} {:>8} {:>8}\n", "shape", "forward", "backward", "sgemm", "fwd/gemm",
                      "bwd/gemm");
    for (const ConvShape& s : kShapes) {
      const double f = find("BM_ConvForward/", s), b = find("BM_ConvBackward/", s), g = find("BM_Sgemm/", s);
      if (f == 0 && b == 0 && g == 0) continue;
      os << fmt::format("{:<28} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.2f} {:>8.2f}\n", s.name, f, b, g, g > 0 ? f / g : 0.0,
                        g > 0 ? b / g : 0.0);
    }
  }

 private:
  double find(const std::string& family, const ConvShape& s) const {
    for (const auto& [name, v] : gflops_)
      if (name.rfind(family + s.name, 0) == 0) return v;
    return 0.0;
  }
  std::map<std::string, double> gflops_;
};

// Takes our own --batch=N and --threads=N out of argv before Google Benchmark parses the rest.
void parse_flags(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) {
      g_batch = std::max<int64_t>(1, std::atoll(argv[i] + 8));
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      qflow::set_num_threads(std::max(1, std::atoi(argv[i] + 10)));
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
}

}  // namespace

// OpenBLAS's DYNAMIC_ARCH build picks its kernels from the CPUID model; CPUs newer than the
// library (e.g. Sapphire/Emerald Rapids under 0.3.21) fall back to the SSE3 "Prescott"
// kernels, several times slower than the AVX-512 ones. Only the environment can fix that
// (the choice is made when the library loads).
void warn_about_blas_core() {
  const std::string core = openblas_get_corename();
  if ((core == "Prescott" || core == "Core2" || core == "Nehalem") && __builtin_cpu_supports("avx2"))
    std::fprintf(stderr,
                 "warning: OpenBLAS runs its generic %s kernels on an AVX2/AVX-512 CPU; rerun with "
                 "OPENBLAS_CORETYPE=%s for the real GEMM speed\n",
                 core.c_str(), __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell");
}

int main(int argc, char** argv) {
  parse_flags(argc, argv);
  warn_about_blas_core();
  for (const ConvShape& s : kShapes) {
    for (auto [family, fn] : {std::pair{"BM_ConvForward/", &BM_ConvForward}, std::pair{"BM_ConvBackward/", &BM_ConvBackward},
                              std::pair{"BM_Sgemm/", &BM_Sgemm}})
      benchmark::RegisterBenchmark((std::string(family) + s.name).c_str(), fn, s)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.2);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
