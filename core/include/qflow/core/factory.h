#pragma once
// Creating tensors. Random functions draw from a Generator (the global one unless given);
// the same seed gives the same numbers on every machine and for every thread count.
#include <initializer_list>
#include <span>
#include <vector>

#include "qflow/core/generator.h"
#include "qflow/core/tensor.h"
#include "qflow/core/ops/factory.h"

namespace qflow {

// Every factory takes the device to create on (Note [Devices]); the *_like ones use t's.
Tensor empty(const IntList& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor zeros(const IntList& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const IntList& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const IntList& sizes, const Scalar& value, std::optional<DType> dtype = std::nullopt,
            Device device = Device::cpu());
/// A 0-dim tensor.
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt, Device device = Device::cpu());
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
/// [start, end) in steps of `step`; int64 when all three are integers, else float32.
Tensor arange(const Scalar& end);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, std::optional<DType> dtype = std::nullopt);

// Random tensors on a device draw the same numbers as on the CPU (drawn there, then copied):
// a seed means one model whatever the device, which the CPU/GPU parity tests rely on.
/// Uniform on [0, 1).
Tensor rand(const IntList& sizes, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = Device::cpu());
/// Standard normal.
Tensor randn(const IntList& sizes, DType dtype = DType::Float32, Generator* gen = nullptr, Device device = Device::cpu());
/// Uniform integers in [low, high).
Tensor randint(int64_t low, int64_t high, const IntList& sizes, DType dtype = DType::Int64, Generator* gen = nullptr);
/// A random permutation of 0..n-1 (int64).
Tensor randperm(int64_t n, Generator* gen = nullptr);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);

/// Copies `values` into a new tensor of shape `sizes` (1-D when sizes is empty).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const IntList& sizes = {});
/// Copies a nested-free initializer list: from_vector<float>({1, 2, 3}, {3}).
template <typename T>
Tensor from_vector(std::initializer_list<T> values, const IntList& sizes = {}) {
  return from_vector(std::vector<T>(values), sizes);
}
/// Wraps memory owned by the caller (no copy). `deleter` runs when the last view dies.
Tensor from_blob(void* data, const IntList& sizes, DType dtype, Storage::Deleter deleter = {});
Tensor from_blob(void* data, const IntList& sizes, const IntList& strides, DType dtype, Storage::Deleter deleter = {});

/// Values of a tensor (any layout) converted to T, in row-major order.
template <typename T>
std::vector<T> to_vector(const Tensor& t);

}  // namespace qflow
