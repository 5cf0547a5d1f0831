// The interception point: a dispatch layer sees every op called on a marked tensor (the way
// fx's tracer and autograd see them), and ops are reachable by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/qflow.h"

using namespace qflow;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

constexpr DispatchKey kLogKey = 20;

// Logs "name(args)" for each call, then passes it on; marks outputs so chains stay visible.
class LoggingLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "logging"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    std::vector<std::string> parts;
    for (const Value& v : args) parts.push_back(describe(v));
    log.push_back(fmt::format("{}({})", op.name, fmt::join(parts, ", ")));
    Stack out = Dispatcher::redispatch(op, args, remaining);
    for (Value& v : out)
      if (v.is_tensor() && v.tensor().defined()) v.tensor().impl()->add_key(kLogKey);
    return out;
  }
  std::vector<std::string> log;
};

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override { Dispatcher::register_layer(kLogKey, layer_); }
  void TearDown() override { Dispatcher::unregister_layer(kLogKey); }
  static Tensor marked(Tensor t) {
    t.impl()->add_key(kLogKey);
    return t;
  }
  std::shared_ptr<LoggingLayer> layer_ = std::make_shared<LoggingLayer>();
};

}  // namespace

TEST_F(DispatchTest, LayerSeesEveryOpOnAMarkedTensorWithItsArguments) {
  Tensor x = marked(from_vector<float>({1, 2, 3, 4}, {2, 2}));
  Tensor y = ones({2, 2});
  Tensor z = (x + y).view({4}) * 2.0;
  EXPECT_THAT(layer_->log, ElementsAre("add(Tensor[2, 2] float32, Tensor[2, 2] float32, 1)", "view(Tensor[2, 2] float32, [4])",
                                       "mul.Scalar(Tensor[4] float32, 2)"));
  EXPECT_EQ(to_vector<float>(z), (std::vector<float>{4, 6, 8, 10}));
}

TEST_F(DispatchTest, UnmarkedTensorsBypassTheLayer) {
  Tensor a = ones({3}) + ones({3});
  EXPECT_TRUE(layer_->log.empty());
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{2, 2, 2}));
}

TEST_F(DispatchTest, ExcludedKeySkipsTheLayerOnThisThread) {
  Tensor x = marked(ones({2}));
  {
    ExcludeKeyGuard off(kLogKey);
    (void)(x + x);
  }
  EXPECT_TRUE(layer_->log.empty());
  (void)(x + x);
  EXPECT_EQ(layer_->log.size(), 1u);
}

TEST_F(DispatchTest, KernelsCallingOpsInternallyAreNotSeenByLayers) {
  // add of int64 + float32 casts internally; the layer must see one call, not the cast.
  Tensor x = marked(from_vector<int64_t>({1, 2}));
  Tensor y = from_vector<float>({0.5f, 0.5f});
  Tensor z = x + y;
  EXPECT_EQ(layer_->log.size(), 1u);
  EXPECT_EQ(z.dtype(), DType::Float32);
}

TEST(DispatchRegistryTest, RegisteringATakenKeyIsRefused) {
  struct Dummy : DispatchLayer {
    std::string_view name() const override { return "dummy"; }
    Stack handle(const OpDef& op, Stack& args, DispatchKeySet r) override { return Dispatcher::redispatch(op, args, r); }
  };
  Dispatcher::register_layer(21, std::make_shared<Dummy>());
  try {
    Dispatcher::register_layer(21, std::make_shared<Dummy>());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("dispatch key 21 is already taken by layer 'dummy'"));
  }
  Dispatcher::unregister_layer(21);
}

TEST(CallByNameTest, OpsAreReachableByNameWithDefaultsFilled) {
  Stack out = call_op("add", {from_vector<float>({1, 2}), from_vector<float>({10, 20})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(to_vector<float>(out[0].tensor()), (std::vector<float>{11, 22}));
  out = call_op("add", {from_vector<float>({1, 2}), from_vector<float>({10, 20}), Scalar(2)});
  EXPECT_EQ(to_vector<float>(out[0].tensor()), (std::vector<float>{21, 42}));
}

TEST(CallByNameTest, UnknownOpSuggestsOverloads) {
  try {
    call_op("add.Tensorz", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("unknown op 'add.Tensorz' (did you mean add, add.Scalar?)"));
  }
}

TEST(CallByNameTest, WrongArgumentKindNamesTheArgument) {
  try {
    call_op("add", {from_vector<float>({1}), Scalar(1.5)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("add: argument 'other' expects Tensor, got Scalar"));
  }
}

TEST(CallByNameTest, MissingArgumentIsNamed) {
  try {
    call_op("mul", {from_vector<float>({1})});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("mul: missing argument 'other' (Tensor)"));
  }
}

TEST(OpRegistryTest, EveryRegisteredOpHasAKernelAndShapeRuleAndParsesBack) {
  const auto all = OpRegistry::instance().all();
  EXPECT_GT(all.size(), 20u);
  for (const OpDef* op : all) {
    EXPECT_NE(op->kernel, nullptr) << op->name;
    EXPECT_NE(op->shape, nullptr) << op->name;
    // The normalised schema text parses back to the same schema.
    EXPECT_EQ(parse_schema(op->schema.to_string()).to_string(), op->schema.to_string()) << op->name;
  }
}

TEST(OpRegistryTest, ShapeRuleAgreesWithKernel) {
  const OpDef& add = OpRegistry::instance().get("add");
  Stack args{from_vector<float>({1, 2, 3}, {3, 1}), from_vector<double>({1, 2}, {1, 2}), Scalar(1)};
  const auto meta = add.infer_shapes(args);
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].sizes, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(meta[0].dtype, DType::Float64);
  Tensor out = call_op("add", args)[0].tensor();
  EXPECT_EQ(out.sizes(), meta[0].sizes);
  EXPECT_EQ(out.dtype(), meta[0].dtype);
}
