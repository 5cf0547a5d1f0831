// Note [OpenBLAS kernel selection]
// Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH: at load time it picks a kernel table
// from the CPU. On recent Xeons (AVX-512 with BF16/FP16, e.g. Sapphire Rapids) it reports
// "Cooperlake" but that table holds the generic SSE3 "Prescott" GEMM kernels: sgemm runs at a
// fifth of the speed the AVX-512 "SkylakeX" kernels reach on the same cores (measured:
// perf shows sgemm_kernel_PRESCOTT under the Cooperlake name). Users set OPENBLAS_CORETYPE to
// fix that, but nobody knows to. So when the user has not chosen a core type, qflow makes
// the choice the library would make if it knew the CPU: SkylakeX for AVX-512 (F, BW, VL, DQ),
// Haswell for AVX2 + FMA. The switch uses OpenBLAS' own entry points: clearing the exported
// `gotoblas` table pointer and calling gotoblas_dynamic_init() again re-runs its selection
// with OPENBLAS_CORETYPE set, including the table's init() (block sizes).
// When: once, on qflow's first BLAS call (use_best_openblas_kernels(), called by every qflow
// BLAS wrapper), not from a static initialiser — linking qflow must not reconfigure a library
// the program may use for itself, and a program that never multiplies a matrix through qflow
// never pays for it. A program that calls OpenBLAS itself and wants the same kernels calls
// select_openblas_kernels() first. QFLOW_KEEP_OPENBLAS_CORE=1 keeps the library's choice.
#include <cblas.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "qflow/core/parallel.h"

extern "C" {
// Exported by libopenblas (DYNAMIC_ARCH builds): the active kernel table and its selector.
extern void* gotoblas __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
}

namespace qflow {
namespace {

// The kernel set OpenBLAS should use on this CPU, or "" when its own choice is right.
std::string preferred_core(const std::string& current) {
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && current != "SkylakeX") return "SkylakeX";
  // AVX2 machines the library does not know fall back to SSE-only tables.
  if (!avx512 && avx2 && (current == "Prescott" || current == "Core2" || current == "Nehalem")) return "Haswell";
  return "";
}

}  // namespace

std::string select_openblas_kernels() {
  const std::string current = openblas_get_corename();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("QFLOW_KEEP_OPENBLAS_CORE") != nullptr) {
    return current;
  }
  if (&gotoblas == nullptr || gotoblas_dynamic_init == nullptr) return current;  // not a DYNAMIC_ARCH build
  const std::string want = preferred_core(current);
  if (want.empty()) return current;
  void* const previous = gotoblas;
  setenv("OPENBLAS_CORETYPE", want.c_str(), 0);
  gotoblas = nullptr;
  gotoblas_dynamic_init();
  if (gotoblas == nullptr) gotoblas = previous;  // the library refused the name: keep what worked
  unsetenv("OPENBLAS_CORETYPE");                 // child processes make their own choice
  return openblas_get_corename();
}

void use_best_openblas_kernels() {
  static std::once_flag once;
  std::call_once(once, [] { (void)select_openblas_kernels(); });
}

}  // namespace qflow
