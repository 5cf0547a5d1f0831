#pragma once
// Tensors for the data layer, made without going through the op registry: loader workers
// create thousands of small tensors per second and only need memory with a shape.
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "qflow/core/tensor.h"

namespace qflow::data::detail {

/// std::allocator with the storage alignment of core, and default-initialising resize (a
/// buffer about to be filled from a file is not zeroed first).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U> AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kStorageAlignment})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{kStorageAlignment}); }
  template <typename U> void construct(U* p) { ::new (static_cast<void*>(p)) U; }
  template <typename U, typename... Args> void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U> bool operator==(const AlignedAllocator<U>&) const { return true; }
};

/// A growable byte buffer that can later become a tensor's storage without a copy.
using ByteBuffer = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

/// A contiguous uint8 tensor of `sizes` over `buffer` (which it keeps alive).
Tensor wrap_bytes(ByteBuffer buffer, const std::vector<int64_t>& sizes);

/// A contiguous view of `sizes` into `base`'s storage starting at element `offset`.
Tensor view_into(const Tensor& base, const std::vector<int64_t>& sizes, int64_t offset);

/// A new contiguous tensor with undefined contents.
Tensor new_tensor(const std::vector<int64_t>& sizes, DType dtype);

}  // namespace qflow::data::detail
