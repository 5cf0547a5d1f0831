// DataLoader: epoch order, collation and the worker pool. See Note [Deterministic loading].
#include "qflow/data/data_loader.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "qflow/core/error.h"
#include "qflow/core/device_runtime.h"
#include "epoch_plan.h"
#include "tensor_alloc.h"

namespace qflow::data {

namespace {

// Stream tags under the epoch seed: the order and the augmentations must not share numbers.
constexpr uint64_t kOrderStream = 0;
constexpr uint64_t kTransformStream = 1;

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t epoch_seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  // Fisher-Yates on one Philox stream: the permutation depends on (seed, epoch) only.
  SampleRng rng(mix_seed(epoch_seed, kOrderStream), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.randint(0, i))]);
  return order;
}

// Copies one transformed sample into its slot of the float32 batch.
void store_sample(const Tensor& image, float* dst) {
  const Tensor x = image.is_contiguous() ? image : image.contiguous();
  const int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::Float32: std::memcpy(dst, x.data_ptr<float>(), static_cast<size_t>(n) * sizeof(float)); break;
    case DType::UInt8: {
      const uint8_t* s = x.data_ptr<uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]) / 255.0f;
      break;
    }
    case DType::Float64: {
      const double* s = x.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      break;
    }
    default: QFLOW_FAIL("DataLoader: samples must be uint8 or floating point images, got {}", x.dtype());
  }
}

}  // namespace

namespace detail {

EpochPlan plan_epoch(int64_t dataset_size, const DataLoaderOptions& options, uint64_t epoch) {
  const uint64_t epoch_seed = mix_seed(options.seed, epoch);
  return {options.sampler.shard(epoch_order(dataset_size, options.shuffle, epoch_seed)),
          mix_seed(epoch_seed, kTransformStream)};
}

int64_t batches_per_epoch(int64_t dataset_size, const DataLoaderOptions& options) {
  const int64_t n = options.sampler.shard_size(dataset_size), bs = options.batch_size;
  return options.drop_last ? n / bs : (n + bs - 1) / bs;
}

}  // namespace detail

struct DataLoader::Epoch {
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  const Dataset* dataset = nullptr;
  const Transform* transform = nullptr;
  std::vector<int64_t> order;
  int64_t batch_size = 1;
  int64_t num_batches = 0;
  uint64_t transform_seed = 0;
  int64_t window = 1;
  bool pin_memory = false;  // Note [Pinned batches]

  std::mutex mutex;
  std::condition_variable space_cv;  // workers wait for room in the window
  std::condition_variable ready_cv;  // the consumer waits for its next batch
  int64_t next_claim = 0;
  int64_t next_deliver = 0;
  bool stop = false;
  bool failed = false;
  std::map<int64_t, Slot> ready;
  std::vector<std::thread> workers;

  Batch build(int64_t b) const;
  void worker_loop();
};

// Batch b: samples [b * batch_size, ...) of the order, transformed and stacked.
Batch DataLoader::Epoch::build(int64_t b) const {
  const int64_t first = b * batch_size;
  const int64_t count = std::min<int64_t>(batch_size, static_cast<int64_t>(order.size()) - first);
  const int64_t classes = dataset->num_classes();
  // Batches on their way to a GPU are built in page-locked memory (Note [Pinned batches]).
  auto new_tensor = [this](const std::vector<int64_t>& sizes, DType dtype) {
    return pin_memory ? empty_pinned(sizes, dtype, Device::cuda(0)) : detail::new_tensor(sizes, dtype);
  };
  Batch batch;
  batch.labels = new_tensor({count}, DType::Int64);
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  std::vector<int64_t> shape;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t index = order[static_cast<size_t>(first + k)];
    Example ex = dataset->get(index);
    QFLOW_CHECK(ex.label >= 0 && (classes == 0 || ex.label < classes),
                "DataLoader: sample {} has label {} outside [0, {})", index, ex.label, classes);
    if (transform != nullptr) {
      SampleRng rng(transform_seed, static_cast<uint64_t>(index));
      ex.image = transform->apply(ex.image, rng);
    }
    QFLOW_CHECK(ex.image.defined() && ex.image.dim() == 3, "DataLoader: sample {} is not an image (C, H, W): shape {}",
                index, ex.image.defined() ? ex.image.sizes() : std::vector<int64_t>{});
    if (k == 0) {
      shape = ex.image.sizes();
      batch.images = new_tensor({count, shape[0], shape[1], shape[2]}, DType::Float32);
    }
    QFLOW_CHECK(ex.image.sizes() == shape,
                "DataLoader: sample {} has shape {} but the batch started with shape {} (add a crop or resize transform)",
                index, ex.image.sizes(), shape);
    store_sample(ex.image, batch.images.data_ptr<float>() + k * ex.image.numel());
    labels[k] = ex.label;
  }
  return batch;
}

void DataLoader::Epoch::worker_loop() {
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock lock(mutex);
      space_cv.wait(lock, [&] { return stop || failed || next_claim >= num_batches || next_claim < next_deliver + window; });
      if (stop || failed || next_claim >= num_batches) return;
      b = next_claim++;
    }
    Slot slot;
    try {
      slot.batch = build(b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex);
      // Every batch before b is already claimed, so nothing the consumer waits for is lost
      // when the others stop claiming after a failure.
      failed = failed || slot.error != nullptr;
      ready.emplace(b, std::move(slot));
    }
    ready_cv.notify_one();
    space_cv.notify_all();
  }
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  QFLOW_CHECK(dataset_ != nullptr, "DataLoader: null dataset");
  QFLOW_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got {}", options_.batch_size);
  QFLOW_CHECK(options_.num_workers >= 0, "DataLoader: num_workers must be >= 0, got {}", options_.num_workers);
  QFLOW_CHECK(options_.prefetch >= 1, "DataLoader: prefetch must be >= 1, got {}", options_.prefetch);
  options_.sampler.validate();
}

DataLoader::~DataLoader() { stop_epoch(); }

int64_t DataLoader::size() const { return detail::batches_per_epoch(dataset_->size(), options_); }

void DataLoader::set_epoch(uint64_t epoch) { next_epoch_ = epoch; }

void DataLoader::start_epoch() {
  stop_epoch();
  detail::EpochPlan plan = detail::plan_epoch(dataset_->size(), options_, next_epoch_++);
  auto e = std::make_unique<Epoch>();
  e->dataset = dataset_.get();
  e->transform = options_.transform.get();
  e->order = std::move(plan.order);
  e->batch_size = options_.batch_size;
  e->num_batches = size();
  e->transform_seed = plan.transform_seed;
  e->window = static_cast<int64_t>(options_.num_workers) * options_.prefetch;
  e->pin_memory = options_.pin_memory;
  epoch_ = std::move(e);
  for (int w = 0; w < options_.num_workers; ++w) epoch_->workers.emplace_back([e = epoch_.get()] { e->worker_loop(); });
}

void DataLoader::stop_epoch() {
  if (!epoch_) return;
  {
    std::lock_guard lock(epoch_->mutex);
    epoch_->stop = true;
  }
  epoch_->space_cv.notify_all();
  // A worker in the middle of a batch finishes it first; get() and transforms are short.
  for (std::thread& t : epoch_->workers) t.join();
  epoch_.reset();
}

std::optional<Batch> DataLoader::next() {
  if (!epoch_) return std::nullopt;
  Epoch& e = *epoch_;
  if (e.next_deliver >= e.num_batches) {
    stop_epoch();
    return std::nullopt;
  }
  if (e.workers.empty()) {
    try {
      return e.build(e.next_deliver++);
    } catch (...) {
      stop_epoch();
      throw;
    }
  }
  Epoch::Slot slot;
  {
    std::unique_lock lock(e.mutex);
    e.ready_cv.wait(lock, [&] { return e.ready.count(e.next_deliver) > 0; });
    auto it = e.ready.find(e.next_deliver);
    slot = std::move(it->second);
    e.ready.erase(it);
    ++e.next_deliver;
  }
  e.space_cv.notify_all();
  if (slot.error) {
    stop_epoch();
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

}  // namespace qflow::data
