#pragma once
// DistributedDataParallel: one model replica per process, gradients averaged across them.
//
// Note [Gradient buckets]
// Every rank runs forward and backward on its own share of the global batch; before the
// optimizer step each gradient must become the mean over the ranks. Sending 62 tensors one by
// one pays 62 latencies; sending one 45 MB tensor after backward pays nothing back to
// computation. So, as PyTorch's DDP, the parameters are grouped into buckets of about
// bucket_cap_mb, filled in reverse order of registration — roughly the order backward
// produces their gradients. A post-accumulate-grad hook (Note [Post-accumulate-grad hooks])
// copies each final gradient into its bucket; when a bucket is full its non-blocking
// allreduce starts, while backward computes the gradients of earlier layers. Buckets start
// in index order on every rank, so all ranks issue the same collectives in the same order.
// The hook of the last gradient waits for all of them and writes the averages back into
// .grad, so when backward returns the gradients are synchronised; synchronize_gradients()
// (before the optimizer step) finishes a round in which some parameter got no gradient,
// counting it as zero on that rank.
//
// The sum over two ranks is the same on both (a + b = b + a in IEEE arithmetic), and the
// division by the world size is the same operation everywhere, so every rank applies the
// bitwise-same update and the replicas never drift apart.
#include <memory>
#include <vector>

#include "qflow/autograd/grad_hooks.h"
#include "qflow/distributed/process_group.h"
#include "qflow/nn/module.h"

namespace qflow::distributed {

struct DataParallelOptions {
  /// Target bucket size in MiB (PyTorch's default 25); 0 puts every parameter in its own bucket.
  double bucket_cap_mb = 25;
  /// Broadcast rank 0's buffers (BatchNorm running statistics, observer ranges) at every
  /// training forward, as PyTorch's broadcast_buffers=True.
  bool broadcast_buffers = true;
  /// Allreduce every quantization observer's range in forward (synchronize_observers), so all
  /// ranks fake-quantize with the same scales.
  bool sync_observers = true;
};

/// Communication figures of the rounds so far.
struct DataParallelStats {
  int64_t rounds = 0;          // synchronised backward passes
  int64_t buckets = 0;         // per round
  double bytes = 0;            // gradient bytes allreduced per round
  double exposed_seconds = 0;  // total time backward or the step waited for communication
};

class DistributedDataParallel : public nn::Module {
 public:
  /// Broadcasts `module`'s parameters and buffers from rank 0 and hooks its parameters.
  explicit DistributedDataParallel(nn::ModulePtr module, DataParallelOptions options = {},
                                   ProcessGroup* group = nullptr);
  ~DistributedDataParallel() override;

  /// The wrapped module's forward (after broadcasting buffers when training).
  TensorList forward_list(const TensorList& inputs) override;

  nn::Module& module() const { return *module_; }
  const nn::ModulePtr& module_ptr() const { return module_; }
  const ProcessGroup& group() const { return group_; }

  /// Rank 0's buffers into every rank's (blocking).
  void broadcast_buffers();
  /// Finishes the current round (see Note [Gradient buckets]); a no-op when backward already
  /// did, or when no gradient arrived since the last round.
  void synchronize_gradients();

  const DataParallelStats& stats() const { return stats_; }
  /// Parameter indices (into module().parameters()) of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_layout() const;

  std::string type_name() const override { return "DistributedDataParallel"; }

 private:
  struct Bucket;
  void on_gradient(size_t param);
  void launch_ready_buckets();
  void finish_round();

  nn::ModulePtr module_;
  DataParallelOptions options_;
  ProcessGroup group_;  // DDP's own communicator (Note [Process group])
  std::vector<Tensor> params_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::pair<size_t, int64_t>> slot_of_;  // param -> (bucket, offset)
  std::vector<bool> arrived_;
  std::vector<autograd::HookHandle> hooks_;
  size_t next_launch_ = 0;
  int64_t arrived_count_ = 0;
  DataParallelStats stats_;
};

}  // namespace qflow::distributed
