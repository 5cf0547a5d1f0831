// The CUDA backend's device communicator (NCCL, Note [Collectives on a device]) as a one-rank
// job — the machines with a GPU here have one — and DistributedDataParallel's buckets on the GPU.
// Several ranks use the same calls (tests/tools/distributed_train_cli_test.cpp runs the
// multi-process logic on the CPU).
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "qflow/core/device_runtime.h"
#include "qflow/distributed/distributed.h"
#include "qflow/qflow.h"

namespace qflow {
namespace {

using testing::gpu;

std::unique_ptr<DeviceCommunicator> one_rank_communicator() {
  DeviceRuntime& rt = device_runtime(gpu());
  const std::string id = rt.new_communicator_id();
  EXPECT_EQ(id.size(), 128u) << "ncclUniqueId";
  return rt.communicator(gpu(), 0, 1, id);
}

TEST(CudaNcclTest, OneRankReductionsAndBroadcastsLeaveEachDtypeAsItIs) {
  QFLOW_REQUIRE_CUDA();
  auto comm = one_rank_communicator();
  ASSERT_NE(comm, nullptr);
  const Tensor f = testing::randn_cpu({1000, 3}, 1);
  for (const CollectiveOp op : {CollectiveOp::Sum, CollectiveOp::Min, CollectiveOp::Max}) {
    Tensor t = f.to(gpu());
    const uint64_t version = t.version();
    comm->all_reduce(t, op);
    EXPECT_EQ(to_vector<float>(t.cpu()), to_vector<float>(f));
    EXPECT_GT(t.version(), version) << "an in-place write";
  }
  Tensor i = arange(0, 17, 1, DType::Int64).to(gpu());
  comm->all_reduce(i, CollectiveOp::Sum);
  EXPECT_EQ(i.sum().item<int64_t>(), 136);
  Tensor b = full({5}, true, DType::Bool, gpu());
  comm->all_reduce(b, CollectiveOp::Max);
  EXPECT_EQ(to_vector<bool>(b.cpu()), std::vector<bool>(5, true));
  Tensor d = testing::randn_cpu({7}, 2, DType::Float64).to(gpu());
  const Tensor before = d.cpu();
  comm->broadcast(d, 0);
  EXPECT_EQ(to_vector<double>(d.cpu()), to_vector<double>(before));
}

TEST(CudaNcclTest, BadTensorsAreRefusedWithTheReason) {
  QFLOW_REQUIRE_CUDA();
  auto comm = one_rank_communicator();
  Tensor host = ones({4});
  EXPECT_THROW(comm->all_reduce(host, CollectiveOp::Sum), Error);
  Tensor strided = ones({4, 4}, DType::Float32, gpu()).t();
  EXPECT_THROW(comm->all_reduce(strided, CollectiveOp::Sum), Error);
  Tensor flags = full({3}, true, DType::Bool, gpu());
  try {
    comm->all_reduce(flags, CollectiveOp::Sum);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot sum bool"), std::string::npos) << e.message();
  }
}

// DistributedDataParallel made on the CPU, its module moved to the GPU afterwards (as
// qflow-train does): its buckets follow the gradients to the GPU; with one rank the averaged
// gradients are the gradients.
TEST(CudaNcclTest, DataParallelBucketsFollowTheModuleToTheGpu) {
  QFLOW_REQUIRE_CUDA();
  manual_seed(3);
  auto model = models::create("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
  distributed::DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.01});
  model->to(gpu());
  const Tensor x = testing::randn_cpu({8, 1, 28, 28}, 4).to(gpu());
  const Tensor y = randint(0, 10, {8}).to(gpu());
  cross_entropy(ddp(x), y).backward();
  ddp.synchronize_gradients();
  for (const Tensor& p : model->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().device().is_cuda());
  }
}

}  // namespace
}  // namespace qflow
