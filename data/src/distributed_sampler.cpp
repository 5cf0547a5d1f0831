// See Note [Sharded epochs].
#include "qflow/data/distributed_sampler.h"

#include "qflow/core/error.h"

namespace qflow::data {

void DistributedSampler::validate() const {
  QFLOW_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got {}", num_replicas);
  QFLOW_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank must be in [0, {}), got {}", num_replicas, rank);
}

int64_t DistributedSampler::shard_size(int64_t n) const {
  if (pad) return (n + num_replicas - 1) / num_replicas;
  return n / num_replicas + (rank < n % num_replicas ? 1 : 0);
}

std::vector<int64_t> DistributedSampler::shard(const std::vector<int64_t>& order) const {
  if (num_replicas == 1) return order;
  const auto n = static_cast<int64_t>(order.size());
  const int64_t count = shard_size(n);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  // Padding repeats the order from its start (n may be smaller than num_replicas).
  for (int64_t k = 0; k < count; ++k) out.push_back(order[static_cast<size_t>((rank + k * num_replicas) % n)]);
  return out;
}

}  // namespace qflow::data
