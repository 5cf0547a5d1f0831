// See Note [Synchronised observers].
#include "qflow/distributed/observer_sync.h"

#include <memory>

#include "qflow/autograd/grad_mode.h"
#include "qflow/core/ops.h"
#include "qflow/quant/observer.h"

namespace qflow::distributed {

int64_t synchronize_observers(nn::Module& root, const ProcessGroup& group) {
  std::vector<quant::Observer*> observers;
  for (const nn::ModulePtr& m : root.modules())
    if (auto* obs = dynamic_cast<quant::Observer*>(m.get())) observers.push_back(obs);
  if (group.size() == 1 || observers.empty()) return static_cast<int64_t>(observers.size());
  auto channel = std::make_shared<ProcessGroup>(group.duplicate());
  for (quant::Observer* obs : observers) {
    obs->set_range_sync([channel](Tensor& min, Tensor& max) {
      NoGradGuard no_grad;
      const int64_t n = min.numel();
      // One MAX reduction: max(-min) = -min(min).
      Tensor packed = cat({min.reshape({-1}).neg(), max.reshape({-1})}, 0).contiguous();
      channel->all_reduce(packed, ReduceOp::Max, "observer range allreduce");
      min = packed.narrow(0, 0, n).neg().reshape(SymIntList(min.sizes().begin(), min.sizes().end()));
      max = packed.narrow(0, n, n).reshape(SymIntList(max.sizes().begin(), max.sizes().end())).contiguous();
    });
  }
  return static_cast<int64_t>(observers.size());
}

}  // namespace qflow::distributed
