#pragma once
// What every CUDA test shares: skipping where there is no GPU (with the reason), strict float32
// (Note [TF32]), and comparing a CUDA result with the CPU kernel's.
#include <gtest/gtest.h>

#include <string>

#include "compare.h"
#include "qflow/core/device_runtime.h"
#include "qflow/core/error.h"
#include "qflow/core/tensor.h"

namespace qflow::testing {

/// Empty when cuda:0 is usable; else why not (cudaGetDeviceCount's error on a machine without a driver).
inline std::string cuda_unavailable_reason() {
  try {
    device_runtime(Device::cuda(0));
    return "";
  } catch (const Error& e) {
    return e.message();
  }
}

/// The GPU the tests run on.
inline Device gpu() { return Device::cuda(0); }

}  // namespace qflow::testing

/// First statement of every GPU test: skips with the reason where there is no GPU, and turns
/// TF32 off so results compare with the CPU's at float32 tolerances.
#define QFLOW_REQUIRE_CUDA()                                                     \
  do {                                                                           \
    if (const std::string why = ::qflow::testing::cuda_unavailable_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                                       \
    ::qflow::set_allow_tf32(false);                                              \
  } while (0)
