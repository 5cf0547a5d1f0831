// nn::Module: registration, dotted names, lookup, modes, dtype conversion, calls and printing.
#include <sstream>
#include <thread>

#include "test_modules.h"

using namespace qflow;
using namespace qflow::nn;
using namespace qflow::nn::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

std::vector<std::string> names_of(const std::vector<NamedTensor>& v) {
  std::vector<std::string> out;
  for (const auto& [name, t] : v) out.push_back(name);
  return out;
}

std::vector<std::string> names_of(const std::vector<NamedModule>& v) {
  std::vector<std::string> out;
  for (const auto& [name, m] : v) out.push_back(name);
  return out;
}

}  // namespace

TEST(ModuleTest, RegistrationRejectsEmptyDottedAndDuplicateNames) {
  Affine m(2);
  EXPECT_EQ(error_of([&] { m.register_parameter("", ones({1})); }),
            "register_parameter: name must not be empty (in Affine)");
  EXPECT_EQ(error_of([&] { m.register_buffer("a.b", ones({1})); }),
            "register_buffer: name 'a.b' must not contain '.' (in Affine)");
  EXPECT_EQ(error_of([&] { m.register_buffer("weight", ones({1})); }),
            "register_buffer: 'weight' is already registered as a parameter of Affine");
  EXPECT_EQ(error_of([&] { m.register_module("calls", Affine(1)); }),
            "register_module: 'calls' is already registered as a buffer of Affine");
  m.register_module("child", Affine(1));
  EXPECT_EQ(error_of([&] { m.register_parameter("child", ones({1})); }),
            "register_parameter: 'child' is already registered as a submodule of Affine");
  EXPECT_EQ(error_of([&] { m.register_module("none", std::shared_ptr<Affine>()); }),
            "register_module: submodule 'none' of Affine is null");
}

TEST(ModuleTest, RegistrationRejectsCyclesAndIntegerParametersRequiringGrad) {
  auto outer = std::make_shared<Block>();
  EXPECT_THAT(error_of([&] { outer->a1->register_module("up", outer); }),
              HasSubstr("would make the module its own descendant"));
  Affine m(1);
  EXPECT_THAT(error_of([&] { m.register_parameter("steps", zeros({1}, DType::Int64)); }),
              HasSubstr("'steps' of Affine has dtype int64; only floating point parameters can require gradients"));
  Tensor frozen = m.register_parameter("frozen", zeros({1}, DType::Int64), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_TRUE(m.weight.requires_grad());
  EXPECT_TRUE(m.weight.is_leaf());
}

TEST(ModuleTest, ParameterWithHistoryIsRegisteredAsALeaf) {
  Tensor base = ones({2}).requires_grad_();
  Tensor derived = base * 3.0f;
  Affine m(2);
  Tensor p = m.register_parameter("p", derived);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(to_vector<float>(p), (std::vector<float>{3, 3}));
}

TEST(ModuleTest, DottedNamesFollowPyTorchOrder) {
  Net net;
  // Same lists as PyTorch gives for the equivalent nn.Module (own entries, then children).
  EXPECT_THAT(names_of(net.named_parameters()),
              ElementsAre("scale", "stem.weight", "stem.bias", "layer1.0.a1.weight", "layer1.0.a1.bias",
                          "layer1.0.a2.weight", "layer1.0.a2.bias", "layer1.1.a1.weight", "layer1.1.a1.bias",
                          "layer1.1.a2.weight", "layer1.1.a2.bias"));
  EXPECT_THAT(names_of(net.named_modules()),
              ElementsAre("", "stem", "layer1", "layer1.0", "layer1.0.a1", "layer1.0.a2", "layer1.1", "layer1.1.a1",
                          "layer1.1.a2"));
  EXPECT_THAT(names_of(net.named_children()), ElementsAre("stem", "layer1"));
  EXPECT_THAT(names_of(net.named_buffers()),
              ElementsAre("stem.calls", "layer1.0.a1.calls", "layer1.0.a2.calls", "layer1.1.a1.calls",
                          "layer1.1.a2.calls"));
  EXPECT_THAT(names_of(net.named_parameters(/*recurse=*/false)), ElementsAre("scale"));
  EXPECT_EQ(net.parameters().size(), 11u);
  EXPECT_EQ(net.modules().size(), 9u);
  EXPECT_TRUE(net.named_modules()[0].second.get() == &net);  // a stack module lists itself
}

TEST(ModuleTest, SharedModulesAndTensorsAreListedOnce) {
  Block host;
  host.register_module("again", host.a1);
  host.register_parameter("tied", host.a2->weight);
  EXPECT_EQ(host.modules().size(), 3u);  // host, a1, a2
  EXPECT_EQ(host.parameters().size(), 4u);
  EXPECT_THAT(names_of(host.named_parameters()), ElementsAre("tied", "a1.weight", "a1.bias", "a2.bias"));
  // state_dict keeps every path, like PyTorch.
  EXPECT_EQ(host.state_dict().size(), 10u);
}

TEST(ModuleTest, GetSubmoduleParameterAndBufferByPath) {
  Net net;
  auto block = net.layer1->at<Block>(1);
  EXPECT_EQ(net.get_submodule("layer1.1.a2").get(), block->a2.get());
  EXPECT_EQ(net.get_submodule<Affine>("layer1.1.a2").get(), block->a2.get());
  EXPECT_EQ(net.get_submodule("").get(), &net);
  EXPECT_TRUE(net.get_parameter("layer1.1.a2.weight").is_same(block->a2->weight));
  EXPECT_TRUE(net.get_parameter("scale").is_same(net.scale));
  EXPECT_TRUE(net.get_buffer("stem.calls").is_same(net.stem->calls));

  EXPECT_EQ(error_of([&] { net.get_submodule("layer1.5.a1"); }),
            "get_submodule('layer1.5.a1'): 'layer1' (Sequential) has no submodule '5'; its submodules are [0, 1]");
  EXPECT_EQ(error_of([&] { net.get_submodule("head"); }),
            "get_submodule('head'): Net has no submodule 'head'; its submodules are [stem, layer1]");
  EXPECT_EQ(error_of([&] { net.get_submodule("layer1..a1"); }), "get_submodule: empty name in path 'layer1..a1'");
  EXPECT_EQ(error_of([&] { net.get_parameter("stem.gain"); }),
            "get_parameter('stem.gain'): 'stem' (Affine) has no parameter 'gain'; its parameters are [weight, bias]");
  EXPECT_EQ(error_of([&] { net.get_buffer("stem.weight"); }),
            "get_buffer('stem.weight'): 'stem' (Affine) has no buffer 'weight'; its buffers are [calls]");
  EXPECT_THAT(error_of([&] { net.get_submodule<Block>("stem"); }), HasSubstr("the module is a Affine"));
}

TEST(ModuleTest, TrainAndEvalReachEveryDescendant) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  for (const auto& m : net.modules()) EXPECT_FALSE(m->is_training()) << m->type_name();
  net.layer1->train();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.stem->is_training());
  EXPECT_TRUE(net.layer1->at<Block>(0)->a2->is_training());
  net.train(true);
  for (const auto& m : net.modules()) EXPECT_TRUE(m->is_training());
}

TEST(ModuleTest, ApplyVisitsChildrenBeforeParents) {
  Block block;
  std::vector<Module*> seen;
  block.apply([&](Module& m) { seen.push_back(&m); });
  EXPECT_THAT(seen, ElementsAre(block.a1.get(), block.a2.get(), &block));
}

TEST(ModuleTest, ZeroGradDropsGradientsAfterBackward) {
  Block block;
  Tensor x = from_vector<float>({1, 2, 3});
  Tensor y = block(x);
  y.backward(ones({3}));
  // d/dw2 of (x * w1 + b1) * w2 + b2 = x * w1 = x.
  EXPECT_EQ(to_vector<float>(block.a2->weight.grad()), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(to_vector<float>(block.a1->bias.grad()), (std::vector<float>{1, 1, 1}));
  block.zero_grad();
  for (const Tensor& p : block.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(ModuleTest, ToConvertsFloatingTensorsInPlaceAndKeepsIntegerBuffers) {
  Net net;
  Tensor held = net.stem->weight;  // e.g. an optimizer's handle
  held.set_grad(full({3}, 0.5f, DType::Float32));
  net.to(DType::Float64);
  EXPECT_EQ(held.dtype(), DType::Float64);
  EXPECT_TRUE(held.is_same(net.get_parameter("stem.weight")));
  EXPECT_TRUE(held.requires_grad());
  EXPECT_EQ(held.grad().dtype(), DType::Float64);
  EXPECT_EQ(to_vector<double>(held.grad()), (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(net.stem->calls.dtype(), DType::Int64);
  for (const Tensor& p : net.parameters()) EXPECT_EQ(p.dtype(), DType::Float64);
  Tensor y = net(from_vector<double>({1, 2, 3}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_EQ(to_vector<double>(y), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(error_of([&] { net.to(DType::Int32); }),
            "Module::to: only floating point dtypes are accepted, got int32");
}

TEST(ModuleTest, NonPersistentBuffersStayOutOfStateDict) {
  Affine m(2);
  m.register_buffer("scratch", zeros({2}), /*persistent=*/false);
  EXPECT_THAT(names_of(m.named_buffers()), ElementsAre("calls", "scratch"));
  EXPECT_EQ(m.state_dict().keys(), (std::vector<std::string>{"weight", "bias", "calls"}));
}

TEST(ModuleTest, AbsentParametersAreSkipped) {
  Affine m(2);
  m.register_parameter("extra", Tensor());
  EXPECT_EQ(m.parameters().size(), 2u);
  EXPECT_FALSE(m.state_dict().contains("extra"));
}

TEST(ModuleTest, ReprMatchesPyTorch) {
  Net net;
  // Printed by PyTorch 1.13 for the equivalent Python modules.
  EXPECT_EQ(net.repr(),
            "Net(\n"
            "  (stem): Affine(3)\n"
            "  (layer1): Sequential(\n"
            "    (0): Block(\n"
            "      (a1): Affine(3)\n"
            "      (a2): Affine(3)\n"
            "    )\n"
            "    (1): Block(\n"
            "      (a1): Affine(3)\n"
            "      (a2): Affine(3)\n"
            "    )\n"
            "  )\n"
            ")");
  std::ostringstream os;
  os << *net.stem;
  EXPECT_EQ(os.str(), "Affine(3)");
  EXPECT_EQ(Sequential().repr(), "Sequential()");
}

namespace {
struct Annotated : Cloneable<Annotated> {
  std::shared_ptr<Affine> inner = register_module("inner", Affine(2));
  std::string extra_repr() const override { return "two\nlines"; }
};
}  // namespace

TEST(ModuleTest, MultiLineExtraReprPrecedesChildren) {
  EXPECT_EQ(Annotated().repr(), "Annotated(\n  two\n  lines\n  (inner): Affine(2)\n)");
  EXPECT_EQ(Annotated().type_name(), "Annotated");
}

namespace {
struct Pair : Cloneable<Pair> {
  TensorList forward_list(const TensorList& in) override { return {in[0] + in[1], in[0] * in[1]}; }
};
struct Weighted : Cloneable<Weighted> {
  TensorList forward_list(const TensorList& in) override { return {in[0] * in[1] + in[2]}; }
};
}  // namespace

TEST(ModuleTest, MultiInputAndMultiOutputCalls) {
  Tensor a = from_vector<float>({1, 2});
  Tensor b = from_vector<float>({3, 4});
  Weighted w;
  EXPECT_EQ(to_vector<float>(w(a, b, a)), (std::vector<float>{4, 10}));
  Pair p;
  TensorList out = p.call({a, b});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(to_vector<float>(out[1]), (std::vector<float>{3, 8}));
  EXPECT_EQ(error_of([&] { p(a, b); }),
            "module call returned 2 outputs; use call() for modules with several outputs");
  Affine single(2);
  EXPECT_EQ(error_of([&] { single(a, b); }),
            "Affine: forward takes 1 input, got 2 (override forward_list to take several)");
  Module bare;
  EXPECT_EQ(error_of([&] { bare(a); }),
            "Module: forward(const Tensor&) is not implemented (override forward or forward_list)");
}

namespace {
// Treats Affine as a leaf (like fx's tracer records call_module) and traces through the rest.
struct RecordingHook : ModuleCallHook {
  std::vector<std::string> calls;
  TensorList call(Module& m, const TensorList& inputs, const Forward& run_forward) override {
    calls.push_back(m.type_name());
    if (dynamic_cast<Affine*>(&m) != nullptr) return {inputs[0] * 10.0f};
    return run_forward(inputs);
  }
};
}  // namespace

TEST(ModuleTest, CallHookSeesEveryModuleBoundaryAndCanSkipForward) {
  Net net;
  RecordingHook hook;
  Tensor x = from_vector<float>({1, 2, 3});
  {
    ModuleCallHookGuard guard(&hook);
    EXPECT_EQ(module_call_hook(), &hook);
    Tensor y = net(x);
    // Five Affines are leaves: x * 10^5, then * scale (2).
    EXPECT_EQ(to_vector<float>(y), (std::vector<float>{2e5f, 4e5f, 6e5f}));
  }
  EXPECT_EQ(module_call_hook(), nullptr);
  EXPECT_THAT(hook.calls, ElementsAre("Net", "Affine", "Sequential", "Block", "Affine", "Affine", "Block", "Affine",
                                      "Affine"));
  // Without the hook the real forward runs: weights 1, biases 0, scale 2.
  EXPECT_EQ(to_vector<float>(net(x)), (std::vector<float>{2, 4, 6}));
}

TEST(ModuleTest, CallHookGuardsNestAndAreThreadLocal) {
  RecordingHook outer, inner;
  ModuleCallHookGuard g1(&outer);
  {
    ModuleCallHookGuard g2(&inner);
    EXPECT_EQ(module_call_hook(), &inner);
    ModuleCallHook* seen_elsewhere = &inner;
    std::thread([&] { seen_elsewhere = module_call_hook(); }).join();
    EXPECT_EQ(seen_elsewhere, nullptr);
  }
  EXPECT_EQ(module_call_hook(), &outer);
}
