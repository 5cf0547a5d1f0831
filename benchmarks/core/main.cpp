// qflow-bench-core: core kernel micro benchmarks (Google Benchmark).
// Run: build/bin/qflow-bench-core [--benchmark_filter=Matmul] [--benchmark_min_time=1] (well under a minute by default).
// After the usual table it prints qflow matmul throughput as a fraction of raw cblas_sgemm.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view kQflow = "BM_QflowMatmul/";
constexpr std::string_view kBlas = "BM_CblasSgemm/";

// The console table as usual, remembering every GFLOP/s figure so that each qflow GEMM can
// be set against the cblas_sgemm run of the same size (same name after the family prefix).
class RatioReporter final : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(OutputOptions options) : ConsoleReporter(options) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      if (auto it = r.counters.find("GFLOP/s"); it != r.counters.end()) {
        if (!gflops_.count(r.benchmark_name())) order_.push_back(r.benchmark_name());
        gflops_[r.benchmark_name()] = it->second.value;
      }
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::ostream& os = GetOutputStream();
    for (const std::string& name : order_) {
      if (name.rfind(kQflow, 0) != 0) continue;
      const std::string rest = name.substr(kQflow.size());  // "256/min_time:0.300/real_time"
      const auto blas = gflops_.find(std::string(kBlas) + rest);
      if (blas == gflops_.end() || blas->second <= 0) continue;
      const double q = gflops_.at(name);
      os << "matmul " << rest.substr(0, rest.find('/')) << ": qflow " << q << " GFLOP/s, cblas_sgemm " << blas->second
         << " GFLOP/s, qflow/cblas = " << q / blas->second << "\n";
    }
  }

 private:
  std::map<std::string, double> gflops_;
  std::vector<std::string> order_;  // run order (sizes ascending)
};

}  // namespace

int main(int argc, char** argv) {
  // A short default measuring time keeps the whole run modest; --benchmark_min_time overrides.
  std::vector<char*> args(argv, argv + argc);
  std::string min_time = "--benchmark_min_time=0.3";
  bool has_min_time = false;
  for (char* a : args) has_min_time = has_min_time || std::string_view(a).rfind("--benchmark_min_time", 0) == 0;
  if (!has_min_time) args.insert(args.begin() + 1, min_time.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  RatioReporter reporter(isatty(STDOUT_FILENO) ? RatioReporter::OO_ColorTabular : RatioReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
