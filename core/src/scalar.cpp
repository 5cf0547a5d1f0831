#include "qflow/core/scalar.h"

namespace qflow {

DType Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    default: return DType::Float32;
  }
}

}  // namespace qflow
