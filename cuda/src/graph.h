#pragma once
// CUDA graph capture (Note [Captured device work]); the runtime's DeviceRuntime::capture.
#include <functional>
#include <memory>

#include "qflow/core/device.h"
#include "qflow/core/device_graph.h"

namespace qflow::cuda {

/// Records the work `work` queues on stream(device) into an instantiated CUDA graph.
std::unique_ptr<DeviceGraph> capture(Device device, const std::function<void()>& work);

}  // namespace qflow::cuda
