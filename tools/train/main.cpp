// qflow-train: train a zoo model on CIFAR-10, Fashion-MNIST, MNIST or a folder of PNGs.
#include <csignal>

#include "../common/openmp_defaults.h"
#include "trainer.h"

namespace {
extern "C" void on_sigint(int) {
  // A second Ctrl-C exits at once; the first asks for a clean stop with a checkpoint.
  if (qflow::tools::stop_requested().exchange(true)) std::_Exit(130);
}
}  // namespace

int main(int argc, char** argv) {
  qflow::tools::use_short_openmp_spin(argv);  // See Note [OpenMP spinning beside other work]
  CLI::App app{"qflow-train — train a model from the qflow zoo (defaults: the CIFAR ResNet18 recipe)"};
  qflow::tools::TrainOptions options;
  qflow::tools::add_train_options(app, options);
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGINT, on_sigint);
  try {
    return qflow::tools::Trainer(options).run();
  } catch (const qflow::Error& e) {
    // Under mpirun the other processes would wait for this one at their next collective:
    // abort stops the whole job, naming this rank (Note [qflow-train under mpirun]).
    if (qflow::distributed::ProcessGroup::world().size() > 1) qflow::distributed::abort("qflow-train: error: " + e.message());
    fmt::print(stderr, "qflow-train: error: {}\n", e.message());
    return 1;
  }
}
