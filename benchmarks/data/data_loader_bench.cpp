// qflow-bench-data: how many images per second the DataLoader delivers on its own, so that
// loading can be compared with the training step it feeds.
//
// Data: a synthetic CIFAR-10 test batch (10,000 random records in the official binary format)
// written to a temp directory and read back through data::CIFAR10, so `get` is the real one.
// Pipeline: the CIFAR training recipe — RandomCrop(32, padding 4), RandomHorizontalFlip,
// ToTensor, Normalize — batch 128, shuffled, for 0 (calling thread), 1 and 2 workers.
// Fashion-MNIST: the 10,000 test images of Debian's package (/usr/share/datasets/fashion-mnist,
// skipped when absent) through qflow-train's Fashion-MNIST pipeline — RandomCrop(28, padding 2),
// flip, ToTensor, Normalize — batch 128, shuffled.
// One benchmark iteration is one epoch; the rate counter is images/s in wall-clock time.
// Compare with the img/s qflow-train prints per epoch (the whole training step).
// Run: build/bin/qflow-bench-data [--benchmark_min_time=2]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "qflow/data/data.h"

namespace {

namespace fs = std::filesystem;
using namespace qflow::data;

constexpr int64_t kImages = 10000;

// Writes the synthetic batch once and removes it at exit.
class SyntheticCifar {
 public:
  SyntheticCifar() : dir_(fs::temp_directory_path() / ("qflow_bench_cifar_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    std::vector<char> records(static_cast<size_t>(kImages * CIFAR10::kRecordBytes));
    std::mt19937 gen(1234);
    for (size_t i = 0; i < records.size(); ++i) records[i] = static_cast<char>(gen() & 0xff);
    for (int64_t r = 0; r < kImages; ++r) records[static_cast<size_t>(r * CIFAR10::kRecordBytes)] = static_cast<char>(r % 10);
    std::ofstream(dir_ / "test_batch.bin", std::ios::binary).write(records.data(), static_cast<std::streamsize>(records.size()));
    dataset_ = std::make_shared<CIFAR10>(dir_.string(), false);
  }
  ~SyntheticCifar() { fs::remove_all(dir_); }
  std::shared_ptr<const Dataset> dataset() const { return dataset_; }

 private:
  fs::path dir_;
  std::shared_ptr<const Dataset> dataset_;
};

const SyntheticCifar& cifar() {
  static const SyntheticCifar data;
  return data;
}

TransformPtr cifar_train_transform() {
  return std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<RandomCrop>(32, 4), std::make_shared<RandomHorizontalFlip>(0.5), std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.4914, 0.4822, 0.4465}, std::vector<double>{0.2470, 0.2435, 0.2616})});
}

void BM_DataLoaderCifarAugment(benchmark::State& state) {
  DataLoader loader(cifar().dataset(), {.batch_size = 128, .shuffle = true, .seed = 0,
                                        .num_workers = static_cast<int>(state.range(0)), .prefetch = 4,
                                        .transform = cifar_train_transform()});
  int64_t images = 0;
  double checksum = 0;
  for (auto _ : state) {
    for (Batch& b : loader) {
      images += b.size();
      checksum += b.images.data_ptr<float>()[0];  // touch the batch like a consumer would
    }
  }
  benchmark::DoNotOptimize(checksum);
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DataLoaderCifarAugment)->ArgName("workers")->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same without augmentation (ToTensor + Normalize): the cost of batching alone.
void BM_DataLoaderCifarPlain(benchmark::State& state) {
  auto plain = std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.4914, 0.4822, 0.4465}, std::vector<double>{0.2470, 0.2435, 0.2616})});
  DataLoader loader(cifar().dataset(), {.batch_size = 128, .shuffle = true, .num_workers = static_cast<int>(state.range(0)),
                                        .prefetch = 4, .transform = plain});
  int64_t images = 0;
  for (auto _ : state)
    for (Batch& b : loader) images += b.size();
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DataLoaderCifarPlain)->ArgName("workers")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_DataLoaderFashionMnistAugment(benchmark::State& state) {
  if (!fs::exists(std::string(FashionMNIST::kDebianRoot) + "/t10k-images-idx3-ubyte.gz")) {
    state.SkipWithError("dataset-fashion-mnist is not installed");
    return;
  }
  static const auto fashion = std::make_shared<FashionMNIST>(FashionMNIST::kDebianRoot, false);
  auto transform = std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<RandomCrop>(28, 2), std::make_shared<RandomHorizontalFlip>(0.5), std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.2860}, std::vector<double>{0.3530})});
  DataLoader loader(fashion, {.batch_size = 128, .shuffle = true, .num_workers = static_cast<int>(state.range(0)),
                              .prefetch = 4, .transform = transform});
  int64_t images = 0;
  for (auto _ : state)
    for (Batch& b : loader) images += b.size();
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(images), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DataLoaderFashionMnistAugment)->ArgName("workers")->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
