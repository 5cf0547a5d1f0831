#pragma once
// OpenMP waiting behaviour for qflow's executables. See Note [OpenMP spinning beside other work].

namespace qflow::tools {

/// Note [OpenMP spinning beside other work]
/// libgomp's idle threads spin for GOMP_SPINCOUNT iterations (300,000 by default) after every
/// parallel region before they sleep. On a quiet machine that saves wake-ups; beside one other
/// CPU-bound process the spinning threads take the core the busy team member needs, and every
/// barrier waits for a thread that is not running. Measured, ResNet18 training at batch 32 on
/// 2 cores beside `yes > /dev/null`: default 30 images/s (0.26x the quiet 116), GOMP_SPINCOUNT=
/// 10000 49 (0.42x; quiet 120, no loss), =1000 56 (quiet 111, -5 %), OMP_WAIT_POLICY=passive 58
/// (quiet 108-110, -5 to -8 %); PyTorch 22 images/s (0.32x its quiet 69). libgomp reads the
/// variable once, when it loads, before main: so an executable that finds neither
/// GOMP_SPINCOUNT nor OMP_WAIT_POLICY set sets GOMP_SPINCOUNT=10000 and runs itself again.
/// A user's setting is left alone; programs built on the library can export the same variable.
inline constexpr const char* kGompSpinCount = "10000";

/// Re-executes the program with GOMP_SPINCOUNT=10000 unless GOMP_SPINCOUNT or OMP_WAIT_POLICY
/// is already set. Returns only when nothing was done (or the re-exec failed).
void use_short_openmp_spin(char** argv);

}  // namespace qflow::tools
