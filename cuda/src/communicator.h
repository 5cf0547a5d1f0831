#pragma once
// The CUDA backend's DeviceCommunicator (NCCL): Note [Collectives on a device], Note [NCCL at run time].
#include <memory>
#include <string>

#include "qflow/core/device_runtime.h"

namespace qflow::cuda {

/// A new NCCL unique id (128 bytes); throws saying why where NCCL is missing.
std::string new_communicator_id();
/// This rank's NCCL communicator on `device` (collective: returns when all `size` ranks joined).
std::unique_ptr<DeviceCommunicator> communicator(Device device, int rank, int size, const std::string& id);

}  // namespace qflow::cuda
