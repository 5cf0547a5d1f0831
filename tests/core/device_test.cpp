// Devices (Note [Devices]) and kernels per device (Note [Kernels per device]) on any machine:
// the text forms, the refusal of tensors on two devices, the error for an op without a kernel,
// and the error for a CUDA tensor where there is no CUDA build or no GPU. (Values computed on a
// GPU are tested in tests/cuda, which skips without one.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "error_of.h"
#include "qflow/core/device_runtime.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::qflow::testing_util::error_of;
using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace {

TEST(DeviceTest, ParsesAndPrintsTheThreeForms) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_EQ(fmt::format("{}", Device::cpu()), "cpu");
  EXPECT_TRUE(Device::cuda().is_cuda());
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  for (const char* bad : {"gpu:x", "cuda:", "cuda:-1", "cuda:1x", "CUDA", "tpu"}) {
    EXPECT_THAT(error_of([&] { Device::parse(bad); }), HasSubstr("expected 'cpu', 'cuda' or 'cuda:<index>'")) << bad;
  }
}

TEST(DeviceTest, TensorsAndTheirViewsLiveOnTheCpuByDefault) {
  Tensor t = ones({2, 3});
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.t().device(), Device::cpu());
  EXPECT_FALSE(t.is_cuda());
  EXPECT_TRUE(t.to(Device::cpu()).is_same(t));  // no copy to where it already is
}

// A tensor that claims to live on cuda:0 but holds host memory: enough to exercise the checks
// that run before any kernel (no kernel may ever read it).
Tensor labelled_cuda_tensor(std::vector<float>& host) {
  auto storage = Storage::wrap(host.data(), host.size() * sizeof(float), {}, Device::cuda(0));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), std::vector<int64_t>{static_cast<int64_t>(host.size())},
                                             std::vector<int64_t>{1}, 0, DType::Float32));
}

TEST(DeviceTest, AnOpOnTensorsOfTwoDevicesIsRefusedNamingTheOpAndBoth) {
  std::vector<float> host(4, 1.0f);
  Tensor gpu = labelled_cuda_tensor(host);
  EXPECT_EQ(gpu.device(), Device::cuda(0));
  EXPECT_EQ(error_of([&] { add(ones({4}), gpu); }),
            "add: expected all tensors on one device, but 'self' is on cpu and 'other' on cuda:0");
  EXPECT_EQ(error_of([&] { cat({ones({4}), gpu}, 0); }),
            "cat: expected all tensors on one device, but 'tensors' is on cpu and 'tensors' on cuda:0");
}

QFLOW_REGISTER_OPS(device_test_ops) {
  auto same = [](const OpArgs& a) { return std::vector<TensorMeta>{TensorMeta{a.tensor("self").sizes()}}; };
  auto identity = [](OpArgs& a) { return Stack{Value(a.tensor("self"))}; };
  registry.def("device_test_cpu_only(Tensor self) -> Tensor", same, identity);
  registry.def("device_test_declared(Tensor self) -> Tensor", same, identity);
  registry.no_kernel({"device_test_declared"}, DeviceType::CUDA, "it exists for this test only");
}

TEST(DeviceTest, AnOpWithoutAKernelForTheDeviceNamesTheOpTheDeviceAndTheReason) {
  std::vector<float> host(4, 1.0f);
  Tensor gpu = labelled_cuda_tensor(host);
  EXPECT_EQ(error_of([&] { call_op("device_test_cpu_only", {gpu}); }),
            "device_test_cpu_only: no kernel for cuda:0 tensors; move them with .to(Device::cpu()) to run it on the cpu");
  EXPECT_EQ(error_of([&] { call_op("device_test_declared", {gpu}); }),
            "device_test_declared: no kernel for cuda:0 tensors: it exists for this test only; move them with "
            ".to(Device::cpu()) to run it on the cpu");
  EXPECT_TRUE(OpRegistry::instance().get("device_test_cpu_only").runs_on(DeviceType::CPU));
  EXPECT_FALSE(OpRegistry::instance().get("device_test_cpu_only").runs_on(DeviceType::CUDA));
}

TEST(DeviceTest, KernelDeclarationsMayComeBeforeTheOpAndAMisspeltOneIsListed) {
  OpRegistry& registry = OpRegistry::instance();
  registry.device_generic({"device_test_defined_later"});
  EXPECT_THAT(registry.unattached_declarations(), ::testing::Contains("device_test_defined_later"));
  const OpDef& op = registry.def("device_test_defined_later(Tensor self) -> Tensor",
                                 [](const OpArgs& a) { return std::vector<TensorMeta>{TensorMeta{a.tensor("self").sizes()}}; },
                                 [](OpArgs& a) { return Stack{Value(a.tensor("self"))}; });
  EXPECT_TRUE(op.device_generic);
  EXPECT_THAT(registry.unattached_declarations(), ::testing::Not(::testing::Contains("device_test_defined_later")));
}

// What a user sees asking for a GPU where there is none: the build without CUDA says how to get
// it; the CUDA build on a machine without a GPU or driver quotes cudaGetDeviceCount's error.
TEST(DeviceTest, ACudaTensorWithoutAGpuGivesAnErrorThatSaysWhy) {
  if (device_count(DeviceType::CUDA) > 0) GTEST_SKIP() << "this machine has a GPU: tests/cuda covers it";
  const auto expected_reason = AnyOf(HasSubstr("built without its CUDA backend. Build it on a machine with the CUDA "
                                               "toolkit and cuDNN: tools/build -DQFLOW_CUDA=ON"),
                                     HasSubstr("no usable CUDA device on this machine (cudaGetDeviceCount: "));
  EXPECT_THAT(error_of([] { ones({2}).to(Device::cuda()); }), expected_reason);
  EXPECT_THAT(error_of([] { zeros({2}, DType::Float32, Device::cuda()); }), expected_reason);
  EXPECT_THAT(error_of([] { randn({2}, DType::Float32, nullptr, Device::cuda()); }), expected_reason);
  EXPECT_THAT(error_of([] { synchronize(Device::cuda()); }), expected_reason);
  EXPECT_THAT(error_of([] { ones({2}).to(Device::cuda()); }), HasSubstr("cuda:0"));
  EXPECT_EQ(has_device_runtime(DeviceType::CUDA), error_of([] { ones({2}).to(Device::cuda()); }).find("cudaGetDeviceCount") != std::string::npos);
}

}  // namespace
