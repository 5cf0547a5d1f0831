// Arguments read by name through the schema (Note [Arguments by name]): lookup, defaults,
// unknown names, calls built by name, and typed wrappers checked against the schema.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing_util::error_of;
using ::testing::HasSubstr;

namespace {

const OpSchema& pool_schema() {
  static const OpSchema schema = parse_schema(
      "pool(Tensor self, int[2] kernel_size, int? divisor=None, float eps=1e-05, Scalar? alpha=None) -> Tensor");
  return schema;
}

TEST(OpArgsTest, ReadsEachArgumentByItsSchemaName) {
  const Tensor x = ones({2, 3});
  Stack stack{x, IntList{3, 2}, Value(), 0.5, Scalar(2)};
  OpArgs a(pool_schema(), stack);
  EXPECT_TRUE(a.tensor("self").is_same(x));
  EXPECT_EQ(a.int_list("kernel_size"), (IntList{3, 2}));
  EXPECT_EQ(a.to_double("eps"), 0.5);
  EXPECT_EQ(a.scalar("alpha").to<int64_t>(), 2);
  EXPECT_EQ(a["kernel_size"].int_list(), (IntList{3, 2}));
  EXPECT_EQ(a.op_name(), "pool");
}

TEST(OpArgsTest, NoneReadsAsAnEmptyOptional) {
  Stack stack{ones({2}), IntList{1, 1}, Value(), 0.5, Value()};
  const OpArgs a(pool_schema(), stack);
  EXPECT_TRUE(a.is_none("divisor"));
  EXPECT_EQ(a.optional_int("divisor"), std::nullopt);
  EXPECT_EQ(a.optional_scalar("alpha"), std::nullopt);
  EXPECT_FALSE(a.is_none("eps"));
  stack[2] = int64_t{4};
  EXPECT_EQ(a.optional_int("divisor"), 4);
}

TEST(OpArgsTest, WritesGoToTheCallersStack) {
  Stack stack{ones({2}), IntList{1, 1}, Value(), 0.5, Value()};
  OpArgs a(pool_schema(), stack);
  a["eps"] = 0.25;
  EXPECT_EQ(stack[3].to_double(), 0.25);
}

TEST(OpArgsTest, AnOmittedTrailingArgumentReadsAsItsDefault) {
  Stack stack{ones({2}), IntList{1, 1}};
  const OpArgs a(pool_schema(), stack);
  EXPECT_EQ(a.to_double("eps"), 1e-05);
  EXPECT_TRUE(a.is_none("divisor"));
  OpArgs writable(pool_schema(), stack);
  EXPECT_EQ(error_of([&] { writable["eps"] = 1.0; }), "pool: argument 'eps' was not passed (2 of 5 arguments given)");
}

TEST(OpArgsTest, AMisspeltNameIsAnErrorListingTheSchemasNames) {
  Stack stack{ones({2}), IntList{1, 1}, Value(), 0.5, Value()};
  const OpArgs a(pool_schema(), stack);
  EXPECT_EQ(error_of([&] { (void)a.int_list("kernel"); }),
            "pool: no argument named 'kernel'; its schema declares (self, kernel_size, divisor, eps, alpha)");
  EXPECT_TRUE(a.has("alpha"));
  EXPECT_FALSE(a.has("beta"));
}

TEST(OpArgsTest, AConstStackIsReadThroughAReadOnlyView) {
  const Stack stack{ones({2, 5}), IntList{2, 2}, Value(), 0.5, Value()};
  const OpArgs a = OpArgs::reading(pool_schema(), stack);
  EXPECT_EQ(a.tensor("self").sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(&a.stack(), &stack);
}

TEST(OpArgsTest, ShapeRulesAndKernelsOfRegisteredOpsReadByName) {
  const OpDef& op = OpRegistry::instance().get("max_pool2d");
  Stack args{ones({1, 1, 4, 4}), IntList{2, 2}};
  normalize_args(op.schema, args);
  const auto meta = op.infer_shapes(args);
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].sizes, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(op.run(args).at(0).tensor().sizes(), meta[0].sizes);
}

TEST(NamedStackTest, PlacesNamedValuesInSchemaOrderAndFillsDefaults) {
  const Tensor x = ones({2});
  const Stack s = named_stack(pool_schema(), {{"kernel_size", IntList{3, 3}}, {"self", x}, {"alpha", Scalar(1)}});
  ASSERT_EQ(s.size(), 5u);
  EXPECT_TRUE(s[0].tensor().is_same(x));
  EXPECT_EQ(s[1].int_list(), (IntList{3, 3}));
  EXPECT_TRUE(s[2].is_none());
  EXPECT_EQ(s[3].to_double(), 1e-05);
  EXPECT_EQ(s[4].scalar().to<int64_t>(), 1);
}

TEST(NamedStackTest, UnknownRepeatedAndMissingArgumentsAreErrors) {
  const Tensor x = ones({2});
  EXPECT_THAT(error_of([&] { named_stack(pool_schema(), {{"self", x}, {"kernel", IntList{1}}}); }),
              HasSubstr("pool: no argument named 'kernel'"));
  EXPECT_EQ(error_of([&] { named_stack(pool_schema(), {{"self", x}, {"self", x}, {"kernel_size", IntList{1}}}); }),
            "pool: argument 'self' is given twice");
  EXPECT_EQ(error_of([&] { named_stack(pool_schema(), {{"self", x}}); }),
            "pool: missing argument 'kernel_size' (int[])");
}

TEST(TypedWrapperTest, NamesInSchemaOrderAreAcceptedAndCalled) {
  static const OpHandle op("add");
  const Tensor y = call_tensor(op, {{"self", full({2}, 1.0f)}, {"other", full({2}, 2.0f)}, {"alpha", Scalar(3)}});
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{7, 7}));
  // Checked once: later calls take the fast path and still compute.
  EXPECT_EQ(to_vector<float>(call_tensor(op, {{"self", y}, {"other", y}, {"alpha", Scalar(1)}})),
            (std::vector<float>{14, 14}));
}

TEST(TypedWrapperTest, AMisorderedWrapperIsRefusedNamingBothOrders) {
  static const OpHandle op("add");
  const Tensor x = ones({2});
  EXPECT_EQ(error_of([&] { call_tensor(op, {{"self", x}, {"alpha", Scalar(1)}, {"other", x}}); }),
            "typed wrapper of op 'add' passes arguments (self, alpha, other) but its schema "
            "'add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor' declares (self, other, alpha) in this order");
}

TEST(TypedWrapperTest, AMisspeltOrMissingNameIsRefused) {
  static const OpHandle misspelt("mul");
  static const OpHandle short_of_one("sub");
  const Tensor x = ones({2});
  EXPECT_THAT(error_of([&] { call_tensor(misspelt, {{"input", x}, {"other", x}}); }),
              HasSubstr("typed wrapper of op 'mul' passes arguments (input, other) but its schema"));
  EXPECT_THAT(error_of([&] { call_tensor(short_of_one, {{"self", x}, {"other", x}}); }),
              HasSubstr("declares (self, other, alpha) in this order"));
}

}  // namespace
