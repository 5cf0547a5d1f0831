#include "openmp_defaults.h"

#include <unistd.h>

#include <cstdlib>

namespace qflow::tools {

void use_short_openmp_spin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kGompSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: then run on with libgomp's default
  unsetenv("GOMP_SPINCOUNT");
}

}  // namespace qflow::tools
