#pragma once
// SavedTensor: a tensor kept by a backward node, with the storage version it had when saved.
//
// Note [Version counter]
// Every in-place write bumps its storage's version. A node records the version of each
// tensor it saves; unpacking a saved tensor whose version moved means an in-place op
// overwrote a value backward needs, and backward fails with a clear error instead of
// computing a wrong gradient. Saved tensors are stored detached, so they never hold their
// own grad_fn (no reference cycles).
#include <string>

#include "qflow/core/tensor.h"

namespace qflow::autograd {

struct SavedTensor {
  SavedTensor(const Tensor& t, bool is_output);
  /// The saved value; throws qflow::Error when freed or modified in place since.
  const Tensor& unpack(const std::string& node_name) const;
  void release() { data = Tensor(); released = true; }

  Tensor data;
  uint64_t version = 0;
  bool is_output = false;
  bool released = false;
};

}  // namespace qflow::autograd
