// Every op is accounted for on the GPU (Note [Kernels per device]): it has a CUDA kernel, runs
// on every device through other ops (device_generic), or declares why it has none. And every op
// that training and evaluating ResNet18, LeNet5 and MobileNetV2 reaches has a kernel there: the
// ops are recorded by a dispatch layer while the models train one step on the CPU, so this runs
// on machines without a GPU too.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "qflow/core/dispatch.h"
#include "qflow/core/op_registry.h"
#include "qflow/qflow.h"

using namespace qflow;

namespace {

/// The ops tests register for themselves (error paths), not part of qflow.
const std::set<std::string> kTestOnlyOps = {"coverage_test_unaccounted"};

constexpr int kCuda = static_cast<int>(DeviceType::CUDA);

bool has_tensor_argument(const OpSchema& schema) {
  for (const ArgSpec& a : schema.args)
    if (a.type == ArgType::Tensor || a.type == ArgType::TensorList) return true;
  return false;
}

std::string cuda_coverage(const OpDef& op) {
  if (op.device_kernels[kCuda]) return "CUDA kernel";
  // Factories (empty, randn, ...) and size arithmetic: no tensor carries a device to them, so
  // they run on the CPU; the typed API creates on a device itself (Note [Devices]).
  if (!has_tensor_argument(op.schema)) return "no tensor argument";
  if (op.device_generic) return "device-generic";
  if (!op.no_kernel_reasons[kCuda].empty()) return "none: " + op.no_kernel_reasons[kCuda];
  return "";
}

TEST(CudaOpCoverageTest, EveryOpHasACudaKernelOrADeclaredReason) {
  std::vector<std::string> missing;
  size_t kernels = 0, generic = 0, declared = 0;
  for (const OpDef* op : OpRegistry::instance().all()) {
    if (kTestOnlyOps.count(op->name)) continue;
    const std::string how = cuda_coverage(*op);
    std::printf("[ cuda ] %-40s %s\n", op->name.c_str(), how.empty() ? "MISSING" : how.c_str());
    if (how.empty()) missing.push_back(op->name);
    kernels += op->device_kernels[kCuda] != nullptr;
    generic += op->device_generic;
    declared += !op->device_kernels[kCuda] && !op->device_generic && !op->no_kernel_reasons[kCuda].empty();
  }
  std::printf("[ cuda ] %zu CUDA kernels, %zu device-generic, %zu declared without\n", kernels, generic, declared);
  EXPECT_GE(kernels, 60u);  // a floor: registrations dropped by the linker would pass the rest vacuously
  EXPECT_TRUE(missing.empty()) << "ops with no CUDA kernel, not device_generic and no declared reason "
                                  "(registry.no_kernel(..., DeviceType::CUDA, reason)): "
                               << fmt::format("{}", fmt::join(missing, ", "));
}

TEST(CudaOpCoverageTest, EveryKernelDeclarationNamesARegisteredOp) {
  EXPECT_TRUE(OpRegistry::instance().unattached_declarations().empty())
      << "impl/device_generic/no_kernel name ops nobody defined: "
      << fmt::format("{}", fmt::join(OpRegistry::instance().unattached_declarations(), ", "));
}

// Records every op a call reaches on this thread, above autograd, so the backward ops are seen
// as the engine calls them (the ops a CPU kernel calls inside itself are not: they never reach
// a CUDA kernel, which does its own work).
constexpr DispatchKey kRecordKey = 24;

class RecordingLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "op recorder"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    ops.insert(op.name);
    return Dispatcher::redispatch(op, args, remaining);
  }
  std::set<std::string> ops;
};

// The model a test trains: the zoo's float model, or its QAT model (traced, the QAT pass with
// `qconfig`, activations fused as qflow-train does), built before the recording starts.
using ModelMaker = std::function<nn::ModulePtr()>;

ModelMaker zoo_model(const std::string& model_name, const models::ModelOptions& options) {
  return [=] {
    manual_seed(0);
    return models::create(model_name, options);
  };
}

ModelMaker qat_model(const std::string& model_name, const models::ModelOptions& options, const quant::QConfig& qconfig) {
  return [=]() -> nn::ModulePtr {
    manual_seed(0);
    nn::ModulePtr model = models::create(model_name, options);
    const Tensor example = randn({2, options.in_channels, options.image_size, options.image_size});
    auto traced = fx::symbolic_trace(model, example);
    auto qat = quant::quantization_aware_training(*traced, example, qconfig);
    fx::fuse_activations(*qat);  // as qflow-train runs it
    return qat;
  };
}

// One SGD training step and one evaluation (loss, argmax accuracy), as qflow-train runs them.
std::set<std::string> ops_of_training(const ModelMaker& make, const models::ModelOptions& options) {
  auto model = make();
  auto layer = std::make_shared<RecordingLayer>();
  Dispatcher::register_layer(kRecordKey, layer);
  struct Unregister {
    ~Unregister() { Dispatcher::unregister_layer(kRecordKey); }
  } unregister;
  manual_seed(0);
  IncludeKeyGuard record_every_call(kRecordKey);
  nn::optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
  Tensor x = randn({2, options.in_channels, options.image_size, options.image_size});
  Tensor y = from_vector<int64_t>({1, 3});
  model->train();
  Tensor loss = cross_entropy((*model)(x), y);
  sgd.zero_grad();
  loss.backward();
  sgd.step();
  (void)loss.item<double>();
  model->eval();
  {
    NoGradGuard no_grad;
    Tensor logits = (*model)(x);
    (void)cross_entropy(logits, y).item<double>();
    (void)logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  return layer->ops;
}

// PTQ as qflow-train --ptq and --sensitivity run it on a GPU (Note [qflow-train
// --sensitivity]): the passes (trace, prepare_ptq with `qconfig`) on the CPU before the
// recording starts, then what runs on the device: calibration on two batches (the second
// wider, so a histogram widens) and an evaluation (loss and argmax accuracy, as evaluate()).
std::set<std::string> ops_of_ptq(const std::string& model_name, const models::ModelOptions& options,
                                 const quant::QConfig& qconfig) {
  manual_seed(0);
  nn::ModulePtr model = models::create(model_name, options);
  const Tensor example = zeros({1, options.in_channels, options.image_size, options.image_size});
  auto ptq = quant::prepare_ptq(*fx::symbolic_trace(model, example), example, qconfig);
  const Tensor x = randn({2, options.in_channels, options.image_size, options.image_size});
  const std::vector<Tensor> calibration = {x, x * 3.0};
  const Tensor y = from_vector<int64_t>({1, 3});
  auto layer = std::make_shared<RecordingLayer>();
  Dispatcher::register_layer(kRecordKey, layer);
  struct Unregister {
    ~Unregister() { Dispatcher::unregister_layer(kRecordKey); }
  } unregister;
  IncludeKeyGuard record_every_call(kRecordKey);
  EXPECT_EQ(quant::calibrate(*ptq, calibration), 2);
  ptq->eval();
  {
    NoGradGuard no_grad;
    Tensor logits = (*ptq)(x);
    (void)cross_entropy(logits, y, Tensor(), Reduction::Sum).item<double>();
    (void)logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  return layer->ops;
}

// Every op of `ops` (what `what` reached) runs on a GPU.
void expect_ops_run_on_cuda(const std::string& what, const std::set<std::string>& ops) {
  ASSERT_GE(ops.size(), 10u) << "the recorder saw almost nothing: is the layer wired?";
  std::vector<std::string> missing;
  for (const std::string& name : ops) {
    const OpDef& op = OpRegistry::instance().get(name);
    // A factory's result is created on the device by the typed API (the grad seed's ones_like).
    if (!op.runs_on(DeviceType::CUDA) && has_tensor_argument(op.schema)) missing.push_back(name);
  }
  std::printf("[ cuda ] %s touches %zu ops: %s\n", what.c_str(), ops.size(), fmt::format("{}", fmt::join(ops, " ")).c_str());
  EXPECT_TRUE(missing.empty()) << what << " reaches ops without a CUDA kernel: " << fmt::format("{}", fmt::join(missing, ", "));
}

void expect_all_run_on_cuda(const std::string& model_name, const models::ModelOptions& options,
                            const ModelMaker& make = nullptr) {
  expect_ops_run_on_cuda(model_name, ops_of_training(make ? make : zoo_model(model_name, options), options));
}

TEST(CudaOpCoverageTest, TrainingAndEvaluatingResNet18RunsOnCuda) { expect_all_run_on_cuda("resnet18", {}); }
TEST(CudaOpCoverageTest, TrainingAndEvaluatingLeNet5RunsOnCuda) {
  expect_all_run_on_cuda("lenet5", {.num_classes = 10, .in_channels = 1, .image_size = 28});
}
TEST(CudaOpCoverageTest, TrainingAndEvaluatingMobileNetV2RunsOnCuda) { expect_all_run_on_cuda("mobilenet_v2", {}); }

// QAT (issue 34): the QAT models of the published configurations train and evaluate on ops
// that all have CUDA kernels — fake quantization, the observers' statistics, QConvBN's folds
// and the learned scales' gradients.
TEST(CudaOpCoverageTest, QatResNet18RunsOnCudaWithEveryQConfigKind) {
  std::vector<std::pair<std::string, quant::QConfig>> configs;
  configs.push_back({"8-bit per-layer symmetric (default)", quant::QConfig{}});
  quant::QConfig affine_channel;
  affine_channel.scheme = quant::Scheme::Affine;
  affine_channel.per_layer = false;
  configs.push_back({"affine per-channel", affine_channel});
  quant::QConfig cambricon;
  cambricon.formula = quant::Formula::Cambricon;
  configs.push_back({"cambricon (power-of-two scales)", cambricon});
  quant::QConfig clipped;
  clipped.ste = quant::Ste::Clipped;
  clipped.bn_fold = quant::BnFold::Batch;
  clipped.bits = 4;
  clipped.activation_bits = 8;
  configs.push_back({"W4A8 clipped STE, batch-statistics fold", clipped});
  for (auto kind : {quant::ObserverKind::Lsq, quant::ObserverKind::Tqt}) {
    quant::QConfig learned;
    learned.observer = kind;
    configs.push_back({kind == quant::ObserverKind::Lsq ? "LSQ" : "TQT", learned});
  }
  for (const auto& [what, qconfig] : configs) {
    SCOPED_TRACE(what);
    expect_all_run_on_cuda("resnet18 QAT (" + what + ")", {}, qat_model("resnet18", {}, qconfig));
  }
}

// PTQ calibration and evaluation (qflow-train --ptq and --sensitivity with --device cuda) with
// each observer --observer offers, all of which --sensitivity accepts: the ranges kept on the
// device (moving average, min/max), the learned quantizers initialised from their first batch
// (LSQ, TQT), and the histogram kinds, whose counting is host work and whose device work is
// the batch's range, the copies and the stored range (Note [Histogram observers on a device]).
TEST(CudaOpCoverageTest, PtqCalibrationAndEvaluationRunOnCudaWithEveryObserver) {
  for (auto kind : {quant::ObserverKind::MovingAverage, quant::ObserverKind::MinMax, quant::ObserverKind::Lsq,
                    quant::ObserverKind::Tqt, quant::ObserverKind::Histogram, quant::ObserverKind::Percentile,
                    quant::ObserverKind::Mse}) {
    quant::QConfig qconfig;
    qconfig.observer = kind;
    const std::string what = fmt::format("resnet18 PTQ (--observer {})", quant::to_string(kind));
    SCOPED_TRACE(what);
    const std::set<std::string> ops = ops_of_ptq("resnet18", {}, qconfig);
    // The observers' own work was recorded: every kind measures a weight's range (amin, amax);
    // the moving average is one op; min/max accumulates with minimum and maximum; the
    // histogram kinds write their histogram's bounds with fill_. (Their copy to the host is
    // no op on the CPU; to_device runs on every device.)
    EXPECT_TRUE(ops.count("amin") && ops.count("amax"));
    if (kind == quant::ObserverKind::MovingAverage) {
      EXPECT_TRUE(ops.count("observe_moving_average_"));
    }
    if (kind == quant::ObserverKind::MinMax) {
      EXPECT_TRUE(ops.count("minimum") && ops.count("maximum"));
    }
    if (kind == quant::ObserverKind::Histogram || kind == quant::ObserverKind::Percentile ||
        kind == quant::ObserverKind::Mse) {
      EXPECT_TRUE(ops.count("fill_"));
    }
    expect_ops_run_on_cuda(what, ops);
  }
}

}  // namespace
