#include "trainer.h"

#include <cmath>
#include <cstdio>
#include <sched.h>

#include <filesystem>
#include <thread>

#include "../common/progress_bar.h"
#include "qflow/core/device_runtime.h"
#include "qflow/fx/fx.h"
#include "qflow/nn/anomaly.h"
#include "qflow/nn/checkpoint.h"
#include "quant_report.h"

namespace qflow::tools {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {

std::string file_in(const std::string& dir, const char* name) { return (std::filesystem::path(dir) / name).string(); }

}  // namespace

EvalResult evaluate(nn::Module& model, data::DataLoader& loader, distributed::ProcessGroup* group,
                    PredictionRecorder* predictions) {
  NoGradGuard no_grad;
  model.eval();
  const Device device = model.device();  // Note [qflow-train --device]
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0;
  for (data::Batch& b : loader) {
    const Tensor images = device.is_cpu() ? b.images : b.images.to(device);
    const Tensor labels = device.is_cpu() ? b.labels : b.labels.to(device);
    const Tensor logits = model(images);
    loss_sum += cross_entropy(logits, labels, Tensor(), Reduction::Sum).item<double>();
    correct += count_correct(logits, labels);
    r.samples += b.size();
    if (predictions != nullptr) predictions->record(logits, labels);
  }
  model.train();
  if (group != nullptr) {  // each rank evaluated its shard
    loss_sum = group->sum(loss_sum, "evaluation loss sum");
    correct = group->sum(correct, "evaluation correct count");
    r.samples = group->sum(r.samples, "evaluation sample count");
  }
  if (r.samples > 0) {
    r.loss = loss_sum / static_cast<double>(r.samples);
    r.accuracy = 100.0 * static_cast<double>(correct) / static_cast<double>(r.samples);
  }
  return r;
}

std::string Trainer::test_set_tag() const {
  const std::string where =
      o_.data.empty() ? std::string("default location") : std::filesystem::absolute(o_.data).lexically_normal().string();
  return fmt::format("{} ({}): first {} test images", o_.dataset, where, data_.test->size());
}

Trainer::Trainer(TrainOptions options) : o_(std::move(options)), device_(Device::parse(o_.device)) {
  // --sensitivity measures post-training quantization of the float weights --qat-from names.
  QFLOW_CHECK(!(o_.qat && o_.analyses_sensitivity()),
              "qflow-train: --sensitivity measures post-training quantization of float weights and trains nothing; "
              "drop --qat (give the float weights with --qat-from FILE)");
  if (!o_.qat_from.empty() && !o_.analyses_sensitivity()) o_.qat = true;
  // Note [qflow-train --cuda-graphs]: "on" insists, so what rules graphs out is an error.
  QFLOW_CHECK(o_.cuda_graphs != "on" || (!device_.is_cpu() && !o_.detect_anomaly && world_.size() == 1),
              "qflow-train: --cuda-graphs on replays training steps as CUDA graphs: it needs --device cuda, one "
              "process and no --detect-anomaly (asked for --device {}{}{})", o_.device,
              o_.detect_anomaly ? ", --detect-anomaly" : "",
              world_.size() > 1 ? fmt::format(", {} processes", world_.size()) : std::string());
  if (!device_.is_cpu()) {  // Note [qflow-train --device]
    if (world_.size() > 1) {
      // Note [qflow-train under mpirun on GPUs]: one GPU per process, that of its local rank.
      QFLOW_CHECK(o_.device == "cuda" || o_.device == "gpu",
                  "qflow-train: under mpirun ({} processes) give --device cuda: each process trains on the GPU of its "
                  "local rank on its machine (asked for --device {}, which would put every process on one GPU)",
                  world_.size(), o_.device);
      const int local = distributed::local_rank(), gpus = device_count(DeviceType::CUDA);
      QFLOW_CHECK(gpus == 0 || local < gpus,
                  "qflow-train: process {} of this machine has no GPU of its own (the machine has {}): start at most "
                  "{} processes per machine (mpirun --map-by ppr:{}:node)", local, gpus, gpus, gpus);
      device_ = Device::cuda(local);
    }
    // Throws with the reason on a machine without the device or a build without its backend.
    (void)device_runtime(device_);
  }
}

namespace {

// All cores, or under mpirun the cores this process may run on (mpirun binds each rank to
// its own) shared with the other ranks on this machine.
int default_threads() {
  cpu_set_t set;
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = std::max(1, CPU_COUNT(&set));
  if (!distributed::launched_by_mpi()) return cores;
  int local = 1;
  if (const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(s));
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(cores, machine / local));
}

}  // namespace

namespace {

// --data-on-device auto's bound on the training set's device bytes. DeviceRuntime reports the
// caching allocator's counters, not the device's capacity, so the bound is fixed: 2 GiB is a
// quarter of an 8 GiB card, the smallest qflow trains on, leaving the rest to the model's
// activations. CIFAR-10 (150 MiB) and Fashion-MNIST (45 MiB) fit many times over; an
// ImageNet-sized folder does not and stays on the CPU loader.
constexpr int64_t kAutoDeviceDataBytes = int64_t{2} << 30;

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

std::unique_ptr<data::BatchLoader> Trainer::make_train_loader() const {
  const data::DataLoaderOptions options{.batch_size = o_.batch_size, .shuffle = true, .seed = o_.seed,
                                        .num_workers = o_.workers, .sampler = distributed::sampler_for(world_),
                                        .transform = data_.train_transform, .pin_memory = device_.is_cuda()};
  const std::string& mode = o_.data_on_device;
  // Runs that train nothing never iterate the training loader: nothing to upload.
  const bool trains = !o_.eval_only && !o_.analyses_sensitivity();
  std::string why_not;
  if (!trains) why_not = "this run trains nothing";
  else if (device_.is_cpu() && mode != "on") why_not = "--device is cpu";
  else if (mode == "off") why_not = "--data-on-device off";
  if (why_not.empty()) why_not = data::DeviceDataLoader::unsupported_reason(*data_.train, data_.train_transform.get());
  const int64_t bytes = why_not.empty() ? data::DeviceDataLoader::bytes_needed(*data_.train) : 0;
  if (why_not.empty() && mode == "auto" && bytes > kAutoDeviceDataBytes)
    why_not = fmt::format("the training set takes {:.0f} MiB, over --data-on-device auto's {:.0f} MiB (force it with "
                          "--data-on-device on)",
                          mib(bytes), mib(kAutoDeviceDataBytes));
  QFLOW_CHECK(mode != "on" || !trains || why_not.empty(), "qflow-train: --data-on-device on: {}", why_not);
  if (why_not.empty()) {
    fmt::print("qflow-train: training data on {} ({:.1f} MiB uint8, cropped, flipped and normalised there)\n", device_,
               mib(bytes));
    return std::make_unique<data::DeviceDataLoader>(data_.train, options, device_);
  }
  // A CPU run keeps its output as it was: there the CPU loader is the only sensible choice.
  if (trains && !device_.is_cpu()) fmt::print("qflow-train: training data loaded and augmented on the CPU ({})\n", why_not);
  return std::make_unique<data::DataLoader>(data_.train, options);
}

void Trainer::build() {
  set_num_threads(o_.threads > 0 ? o_.threads : default_threads());
  manual_seed(o_.seed);
  if (!o_.predictions.empty()) check_predictions_path(o_.predictions);
  data_ = make_data(o_.data_options());  // --eval-only: the test split alone, unless --ptq calibrates
  model_ = models::create(o_.model, {.num_classes = data_.num_classes(), .in_channels = data_.channels,
                                     .image_size = data_.image_size});
  // QConvBN folds its BatchNorm into the convolution; PTQ folds it for good.
  QFLOW_CHECK(!o_.sync_bn || (!o_.qat && !o_.ptq),
              "qflow-train: --sync-bn applies to float training; --qat and --ptq fold the BatchNorms into the convolutions");
  // With --eval-only --qat the weights are the QAT model's (loaded in evaluate_only).
  if (!o_.weights.empty() && !(o_.eval_only && o_.qat)) load_float_weights(*model_, o_.weights);
  if (data_.train) train_loader_ = make_train_loader();
  test_loader_ = std::make_unique<data::DataLoader>(
      data_.test, data::DataLoaderOptions{.batch_size = 256, .num_workers = o_.workers,
                                          .sampler = distributed::sampler_for(world_, /*pad=*/false),
                                          .transform = data_.test_transform, .pin_memory = device_.is_cuda()});
  setup_quant();  // before the optimizer: with --qat it trains the QAT model's parameters
  step_model_ = model_;
  // --detect-anomaly debugs the model as written: its messages name the user's modules.
  const bool fuse = !o_.no_fuse && !o_.detect_anomaly;
  if (auto qat = std::dynamic_pointer_cast<fx::GraphModule>(model_)) {
    if (fuse) fx::fuse_activations(*qat);  // the QAT model itself: its deploy pass restores the ReLUs
  } else if (fuse || o_.sync_bn) {
    // Zeros: tracing only needs the shapes, and drawing an input would move the random stream.
    auto gm = fx::symbolic_trace(model_, zeros({1, data_.channels, data_.image_size, data_.image_size}));
    // The trace calls its modules by path, so a SyncBatchNorm put in place of a BatchNorm runs
    // (model_, the checkpoints and evaluation keep the BatchNorms: the same tensors, and in
    // eval mode the same computation). Before fusing: a fused BatchNormReLU2d is no BatchNorm.
    if (o_.sync_bn) distributed::convert_sync_batchnorm(*gm, world_);
    if (fuse) fx::fuse_activations(*gm);
    step_model_ = gm;
  }
  ddp_ = std::make_shared<distributed::DistributedDataParallel>(
      model_, distributed::DataParallelOptions{.bucket_cap_mb = o_.bucket_mb}, &world_);
  optimizer_ = make_optimizer();
  // Note [qflow-train --cuda-graphs]: eager where graphs cannot help or cannot hold the step.
  const GraphMode graphs = world_.size() > 1 || o_.detect_anomaly ? GraphMode::Off : parse_graph_mode(o_.cuda_graphs);
  step_ = std::make_unique<TrainStep>(*step_model_, *model_, *optimizer_, *ddp_, o_.checkpoint_dir, graphs, device_,
                                      o_.batch_size);
  std::vector<std::shared_ptr<nn::optim::LRScheduler>> parts;
  if (o_.warmup_epochs > 0) parts.push_back(std::make_shared<nn::optim::LinearWarmup>(*optimizer_, o_.warmup_epochs));
  if (o_.schedule == "cosine") {
    parts.push_back(std::make_shared<nn::optim::CosineAnnealingLR>(*optimizer_, o_.epochs));
  } else if (o_.schedule == "multistep") {
    auto ms = o_.milestones.empty() ? std::vector<int64_t>{o_.epochs / 2, o_.epochs * 3 / 4} : o_.milestones;
    parts.push_back(std::make_shared<nn::optim::MultiStepLR>(*optimizer_, ms, o_.gamma));
  }
  scheduler_ = std::make_shared<nn::optim::ChainedScheduler>(*optimizer_, parts);
  int64_t params = 0;
  for (const Tensor& p : model_->parameters()) params += p.numel();
  fmt::print("qflow-train: {} ({:.2f} M parameters) on {} — {} {} test images, {} classes, {} threads{}\n", o_.model,
             static_cast<double>(params) / 1e6, o_.dataset,
             data_.train ? fmt::format("{} train /", data_.train->size()) : std::string("no training images read,"),
             data_.test->size(), data_.num_classes(), num_threads(),
             device_.is_cpu() ? std::string()
                              : fmt::format(", on {} ({})", device_runtime(device_).device_name(device_), device_));
  if (world_.size() > 1)
    fmt::print("qflow-train: data-parallel on {} processes ({} threads each): global batch {} = {} × --batch-size {}; "
               "rank 0 prints and writes files\n", world_.size(), num_threads(), global_batch(), world_.size(),
               o_.batch_size);
}

int64_t Trainer::resume_step(int64_t step, int64_t saved_global_batch) const {
  if (step == 0 || saved_global_batch == global_batch()) return step;
  const int64_t images = step * saved_global_batch;
  QFLOW_CHECK(images % global_batch() == 0,
              "--resume: the checkpoint was saved {} batches of {} images into its epoch ({} images), not a whole number "
              "of this run's global batches of {} ({} processes × --batch-size {}); resume with a global batch that "
              "divides {}, or from a checkpoint saved at the end of an epoch",
              step, saved_global_batch, images, global_batch(), world_.size(), o_.batch_size, images);
  return images / global_batch();
}

void Trainer::record_step(int64_t epoch, int64_t step, double loss, int64_t correct, int64_t images) {
  Tensor sums = from_vector<double>({loss * static_cast<double>(images), static_cast<double>(correct),
                                     static_cast<double>(images)}, {3});
  if (world_.size() > 1) world_.all_reduce(sums, distributed::ReduceOp::Sum, "step loss and accuracy");
  if (!log_) return;
  const std::vector<double> s = to_vector<double>(sums);
  log_->append_step({.step = step, .epoch = epoch + 1, .train_loss = s[0] / s[2], .train_acc = 100.0 * s[1] / s[2]});
}

bool Trainer::stop_agreed() {
  const bool mine = stop_requested().load();
  if (world_.size() == 1) return mine;
  return world_.sum(int64_t{mine ? 1 : 0}, "Ctrl-C agreement") > 0;
}

void Trainer::move_to_device() {
  if (device_.is_cpu()) return;
  model_->to(device_);
  step_model_->to(device_);  // shares model_'s tensors (moved in place); any of its own follow
  optimizer_->to(device_);
}

int Trainer::evaluate_only() {
  const std::string weights = o_.weights.empty() ? file_in(o_.checkpoint_dir, "best.safetensors") : o_.weights;
  QFLOW_CHECK(std::filesystem::exists(weights), "qflow-train: --eval-only needs --weights FILE or {}", weights);
  if (o_.qat) model_->load_state_dict(nn::load(weights));
  else load_float_weights(*model_, weights);
  move_to_device();
  const EvalResult r = evaluate_test(/*final=*/true);
  fmt::print("eval {}: test loss {:.4f}  accuracy {:.2f}% ({} images)\n", weights, r.loss, r.accuracy, r.samples);
  if (writes_files()) report_quant(r);
  return 0;
}

EvalResult Trainer::evaluate_test(bool final) {
  if (!final || o_.predictions.empty()) return evaluate(*model_, *test_loader_, &world_);
  PredictionRecorder predictions(*test_loader_, data_.num_classes());
  const EvalResult r = evaluate(*model_, *test_loader_, &world_, &predictions);
  predictions.write_csv(o_.predictions, world_);
  return r;
}

void Trainer::save_last(int64_t epoch, int64_t step) const {
  try {
    save_last_unchecked(epoch, step);
  } catch (const Error& e) {
    // nn's message names the file, the bytes and the system's reason; say which state it was.
    QFLOW_FAIL("could not save the training state after step {}: {}", epoch * train_loader_->size() + step, e.message());
  }
}

void Trainer::save_last_unchecked(int64_t epoch, int64_t step) const {
  // The epoch's running sums over every rank (each counted its own images).
  const double loss_sum = world_.sum(loss_sum_, "epoch loss sum");
  const int64_t correct = world_.sum(correct_, "epoch correct count"), seen = world_.sum(seen_, "epoch image count");
  if (!writes_files()) return;
  if (log_) log_->write_steps();  // the logs first: they never describe steps the checkpoint lacks
  nn::save_training_checkpoint(file_in(o_.checkpoint_dir, "last.safetensors"), *model_, *optimizer_, scheduler_.get(),
                               {.epoch = epoch, .step = step},
                               {{"model", o_.model}, {"dataset", o_.dataset}, {"quant", quant_tag()},
                                {"qconfig_mapping", qconfig_mapping_tag()},
                                {"float_acc", float_acc_ ? fmt::format("{:.17g}", *float_acc_) : ""},
                                {"best_acc", fmt::format("{:.17g}", best_acc_)},
                                {"epoch_loss_sum", fmt::format("{:.17g}", loss_sum)}, {"epoch_correct", std::to_string(correct)},
                                {"epoch_seen", std::to_string(seen)}, {"world_size", std::to_string(world_.size())},
                                {"global_batch", std::to_string(global_batch())}});
}

bool Trainer::train_epoch(int64_t epoch, int64_t skip) {
  model_->train();
  step_model_->train();  // its fused modules are not model_'s children
  train_loader_->set_epoch(static_cast<uint64_t>(epoch));
  step_->new_epoch();  // the learning rate may have changed: graphs are captured again
  const int64_t batches = train_loader_->size();
  ProgressBar bar(fmt::format("epoch {}/{}", epoch + 1, o_.epochs), batches);
  // Only around training: evaluation records no gradients and cannot change the weights.
  std::unique_ptr<nn::DetectAnomaly> anomaly;
  if (o_.detect_anomaly) anomaly = std::make_unique<nn::DetectAnomaly>(*step_model_);
  int64_t step = 0;
  auto fields = [&] {
    return seen_ == 0 ? std::string("loss -     acc -    ")
                      : fmt::format("loss {:.4f} acc {:5.2f}%", loss_sum_ / static_cast<double>(seen_),
                                    100.0 * static_cast<double>(correct_) / static_cast<double>(seen_));
  };
  if (skip > 0) bar.resume_at(skip);
  for (data::Batch& b : *train_loader_) {
    if (step < skip) {  // resuming mid-epoch: these batches were already trained on
      ++step;
      continue;
    }
    const int64_t global_step = epoch * batches + step + 1;  // 1-based, counts optimizer steps
    StepResult result;
    // Note [qflow-train --device]: the batch goes where the model is.
    const Tensor images = device_.is_cpu() ? b.images : b.images.to(device_);
    const Tensor labels = device_.is_cpu() ? b.labels : b.labels.to(device_);
    try {
      ddp_->broadcast_buffers();  // rank 0's running statistics (Note [qflow-train under mpirun])
      result = (*step_)(images, labels);
    } catch (const Error& e) {
      bar.finish(fields());
      QFLOW_FAIL("step {} (epoch {}, batch {} of {}): {}", global_step, epoch + 1, step + 1, batches, e.message());
    }
    const double loss_value = result.loss;
    const int64_t correct = result.correct;
    loss_sum_ += loss_value * static_cast<double>(b.size());
    correct_ += correct;
    seen_ += b.size();
    record_step(epoch, global_step, loss_value, correct, b.size());
    ++step;
    bar.update(1, b.size() * world_.size(), fields());  // images of the global batch
    if (o_.checkpoint_every > 0 && global_step % o_.checkpoint_every == 0) save_last(epoch, step);
    if (stop_agreed()) {
      save_last(epoch, step);
      bar.finish(fields());
      fmt::print("\nqflow-train: interrupted; state saved to {} (continue with --resume)\n",
                 file_in(o_.checkpoint_dir, "last.safetensors"));
      return false;
    }
  }
  bar.finish(fields());
  return true;
}

int Trainer::run() {
  // The other ranks say nothing; their errors still reach stderr.
  if (!writes_files() && std::freopen("/dev/null", "w", stdout) == nullptr) QFLOW_FAIL("cannot silence rank {}", world_.rank());
  build();
  if (o_.eval_only) return evaluate_only();
  if (o_.analyses_sensitivity()) return analyse_sensitivity();
  if (writes_files()) {
    std::filesystem::create_directories(o_.checkpoint_dir);
    // Saves that a killed earlier run left unfinished (Note [Interrupted writes]).
    for (const char* name : {"last.safetensors", "best.safetensors", "deploy.safetensors"})
      nn::remove_abandoned_temporaries(file_in(o_.checkpoint_dir, name));
  }
  world_.barrier("start of training");  // rank 0 has cleaned the directory the others read
  int64_t start_epoch = 0, start_step = 0;
  if (o_.resume) {
    const std::string last = file_in(o_.checkpoint_dir, "last.safetensors");
    QFLOW_CHECK(std::filesystem::exists(last), "qflow-train: --resume: no checkpoint at {}{}", last,
                world_.size() > 1 ? fmt::format(" (every process reads the checkpoint: put --checkpoint-dir on a "
                                                "filesystem all machines share)")
                                  : std::string());
    nn::CheckpointMetadata meta;
    nn::CheckpointMetadata peek;
    (void)nn::load(last, &peek);
    const std::string saved_quant = peek.count("quant") ? peek.at("quant") : "none";
    QFLOW_CHECK(saved_quant == quant_tag(), "--resume: {} was trained with quantization '{}' but the flags ask for '{}'",
                last, saved_quant, quant_tag());
    // A checkpoint from before mappings had its one QConfig everywhere: the flags' alone.
    const std::string saved_mapping =
        peek.count("qconfig_mapping") ? peek.at("qconfig_mapping")
        : o_.qat                      ? quant::QConfigMapping(o_.qconfig_mapping().global()).to_json()
                                      : "";
    QFLOW_CHECK(saved_mapping == qconfig_mapping_tag(),
                "--resume: {} was trained with the QConfig mapping {} but the flags and --qconfig ask for {}", last,
                saved_mapping, qconfig_mapping_tag());
    const auto p = nn::load_training_checkpoint(last, *model_, *optimizer_, scheduler_.get(), &meta);
    const int64_t saved_global = meta.count("global_batch") ? std::stoll(meta.at("global_batch")) : global_batch();
    const int64_t saved_world = meta.count("world_size") ? std::stoll(meta.at("world_size")) : 1;
    start_epoch = p.epoch, start_step = resume_step(p.step, saved_global);
    if (meta.count("float_acc") && !meta.at("float_acc").empty()) float_acc_ = std::stod(meta.at("float_acc"));
    best_acc_ = std::stod(meta.at("best_acc"));
    if (writes_files()) {  // the sums of every rank so far: counted once, by rank 0
      loss_sum_ = std::stod(meta.at("epoch_loss_sum"));
      correct_ = std::stoll(meta.at("epoch_correct"));
      seen_ = std::stoll(meta.at("epoch_seen"));
    }
    fmt::print("qflow-train: resuming at epoch {} batch {}{}\n", start_epoch + 1, start_step,
               saved_world == world_.size() && saved_global == global_batch()
                   ? std::string()
                   : fmt::format(" (saved by {} process(es) with global batch {}; now {} with global batch {})",
                                 saved_world, saved_global, world_.size(), global_batch()));
    std::fflush(stdout);  // visible at once in a log file, even if this run is killed soon
  }
  move_to_device();  // after the resume, which loads on the CPU (Note [qflow-train --device])
  if (writes_files()) log_.emplace(o_.checkpoint_dir, o_.resume, start_epoch, start_epoch * train_loader_->size() + start_step);
  std::optional<EvalResult> last_test;
  for (int64_t epoch = start_epoch; epoch < o_.epochs; ++epoch) {
    const double lr = optimizer_->lr(0);
    ProgressBar timer("", 1);
    const int64_t seen_before = seen_;  // a resumed epoch's earlier images were timed by an earlier run
    if (!train_epoch(epoch, epoch == start_epoch ? start_step : 0)) return 130;
    const double seconds = timer.elapsed_seconds();
    ddp_->broadcast_buffers();  // every rank evaluates rank 0's model
    const EvalResult test = evaluate_test(/*final=*/epoch + 1 == o_.epochs);
    last_test = test;
    // Over all ranks (rank 0 alone carries a resumed epoch's earlier sums).
    const double loss_sum = world_.sum(loss_sum_, "epoch loss sum");
    const int64_t correct = world_.sum(correct_, "epoch correct count"), seen = world_.sum(seen_, "epoch image count");
    const int64_t timed = world_.sum(seen_ - seen_before, "epoch timed images");
    const EpochRecord rec{epoch + 1, loss_sum / static_cast<double>(std::max<int64_t>(seen, 1)),
                          100.0 * static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1)), test.loss,
                          test.accuracy, lr, static_cast<double>(timed) / std::max(seconds, 1e-9), seconds};
    scheduler_->step();
    loss_sum_ = 0, correct_ = 0, seen_ = 0;
    const bool best = test.accuracy > best_acc_;
    if (best) best_acc_ = test.accuracy;
    if (best && writes_files()) {
      try {
        nn::save(model_->state_dict(), file_in(o_.checkpoint_dir, "best.safetensors"),
                 {{"quant", quant_tag()},
                  {"qconfig_mapping", qconfig_mapping_tag()},
                  {"test_set", test_set_tag()},
                  {"test_accuracy", fmt::format("{:.17g}", test.accuracy)},
                  {"test_loss", fmt::format("{:.17g}", test.loss)}});
      } catch (const Error& e) {
        QFLOW_FAIL("could not save the best weights after epoch {}: {}", epoch + 1, e.message());
      }
    }
    // The logs first, the checkpoint last: a run killed in between resumes from the previous
    // checkpoint and RunLog drops the records after it, so logs and weights always agree.
    if (log_) {
      log_->append(rec);
      log_->plot(train_loader_->size());
    }
    save_last(epoch + 1, 0);
    fmt::print("epoch {}/{}: train loss {:.4f} acc {:.2f}% | test loss {:.4f} acc {:.2f}%{} | lr {:.4g} | {:.0f} img/s\n",
               epoch + 1, o_.epochs, rec.train_loss, rec.train_acc, rec.test_loss, rec.test_acc, best ? " (best)" : "", lr,
               rec.images_per_s);
    if (o_.stop_after > 0 && epoch + 1 >= o_.stop_after && epoch + 1 < o_.epochs) {
      fmt::print("qflow-train: stopping after epoch {} as asked; continue with --resume\n", epoch + 1);
      return 0;
    }
  }
  fmt::print("qflow-train: best test accuracy {:.2f}%; checkpoints, log.csv, log.jsonl, steps.csv and curves.png in {}\n", best_acc_,
             o_.checkpoint_dir);
  if (writes_files()) report_quant(last_test);
  return 0;
}

}  // namespace qflow::tools
