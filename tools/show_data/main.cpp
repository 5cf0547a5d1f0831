// qflow-show-data: save a batch of a data set as one labelled PNG grid, loaded exactly as
// qflow-train loads it (same files, same seeded order, same transforms with --augment), so a
// user can look at what the model is fed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "common/cli_checks.h"
#include "common/cli_flags.h"
#include "common/data_setup.h"
#include "qflow/qflow.h"
#include "viz/image_grid.h"

namespace {

struct ShowOptions {
  std::string dataset = "fashion-mnist";
  std::string data;
  bool train = true;
  int64_t count = 32;
  int64_t columns = 8;
  int64_t scale = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  bool augment = false;
  std::string output = "data.png";
};

void add_show_options(CLI::App& app, ShowOptions& o) {
  qflow::tools::add_dataset_flags(app, o.dataset, o.data);
  app.add_flag("--train,!--test", o.train, "Show the training split (--test: the test split)")->capture_default_str();
  app.add_option("--count", o.count, "Images in the grid (at most the split's size)")
      ->check(qflow::tools::kPositive)
      ->capture_default_str();
  app.add_option("--columns", o.columns, "Images per row")->check(qflow::tools::kPositive)->capture_default_str();
  app.add_option("--scale", o.scale, "Integer upscaling (0 = enough for 64-pixel images)")
      ->check(qflow::tools::kNonNegative)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the order and the augmentation (qflow-train's --seed, epoch 1)")
      ->capture_default_str();
  app.add_flag("--shuffle,!--no-shuffle", o.shuffle, "A seeded random batch (--no-shuffle: the first --count images)")
      ->capture_default_str();
  app.add_flag("--augment,!--no-augment", o.augment,
               "Apply the training augmentation (random crop + flip, as qflow-train does)")
      ->capture_default_str();
  app.add_option("-o,--output", o.output, "PNG file to write")->capture_default_str();
}

int show(const ShowOptions& o) {
  using namespace qflow;
  const tools::DataSetup setup = tools::make_data(
      {.dataset = o.dataset, .data = o.data, .augment = o.augment, .load_train = o.train, .load_test = !o.train});
  const auto dataset = o.train ? setup.train : setup.test;
  const int64_t count = std::min(o.count, dataset->size());
  // The loader's first batch is what qflow-train's first batch of epoch 1 holds (for a batch
  // size of --count): the same permutation and per-sample augmentation streams.
  data::DataLoader loader(dataset, {.batch_size = count, .shuffle = o.shuffle, .seed = o.seed,
                                    .transform = o.augment ? setup.train_transform : setup.test_transform});
  loader.set_epoch(0);
  loader.start_epoch();
  const std::optional<data::Batch> batch = loader.next();
  QFLOW_CHECK(batch.has_value(), "qflow-show-data: the {} split of {} is empty", o.train ? "train" : "test", o.dataset);
  const Tensor grid = viz::make_image_grid(batch->images, batch->labels, dataset->class_names(),
                                            {.columns = o.columns, .scale = o.scale, .mean = setup.mean, .std = setup.std});
  data::write_png(o.output, grid);
  fmt::print("qflow-show-data: {} {} images of {} ({} of {}{}{}) -> {} ({}x{} pixels)\n", count, o.train ? "train" : "test",
             o.dataset, o.shuffle ? "seeded sample" : "first", dataset->size(), o.augment ? ", augmented" : "",
             o.shuffle ? fmt::format(", seed {}", o.seed) : "", o.output, grid.sizes()[2], grid.sizes()[1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qflow-show-data — save a batch of a data set as one labelled PNG grid"};
  ShowOptions options;
  add_show_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return show(options);
  } catch (const qflow::Error& e) {
    fmt::print(stderr, "qflow-show-data: error: {}\n", e.message());
    return 1;
  }
}
