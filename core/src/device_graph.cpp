#include "qflow/core/device_graph.h"

#include <algorithm>
#include <utility>

#include "qflow/core/device_runtime.h"
#include "qflow/core/error.h"
#include "qflow/core/storage.h"

namespace qflow {

std::unique_ptr<DeviceGraph> capture_graph(Device device, const std::function<void()>& work) {
  QFLOW_CHECK(!device.is_cpu(),
              "capture_graph: the cpu has no graphs to record work into (Note [Captured device work]); on the cpu, "
              "call the function itself");
  return device_runtime(device).capture(device, work);
}

namespace detail {

std::vector<std::weak_ptr<Storage>>* record_version_bumps(std::vector<std::weak_ptr<Storage>>* into) {
  return std::exchange(captured_version_bumps, into);
}

void deduplicate(std::vector<std::weak_ptr<Storage>>& storages) {
  std::erase_if(storages, [](const std::weak_ptr<Storage>& s) { return s.expired(); });
  const auto before = [](const std::weak_ptr<Storage>& a, const std::weak_ptr<Storage>& b) { return a.owner_before(b); };
  std::sort(storages.begin(), storages.end(), before);
  storages.erase(std::unique(storages.begin(), storages.end(),
                             [&](const auto& a, const auto& b) { return !before(a, b) && !before(b, a); }),
                 storages.end());
}

void bump_versions(const std::vector<std::weak_ptr<Storage>>& storages) {
  for (const auto& weak : storages)
    if (const auto s = weak.lock()) s->bump_version();
}

}  // namespace detail
}  // namespace qflow
