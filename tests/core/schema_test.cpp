#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qflow/qflow.h"
#include "qflow/core/schema.h"

using namespace qflow;
using ::testing::HasSubstr;

TEST(SchemaTest, ParsesArgumentsDefaultsAndKeywordOnlyMarker) {
  OpSchema s = parse_schema("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload, "");
  ASSERT_EQ(s.args.size(), 3u);
  EXPECT_EQ(s.args[2].name, "alpha");
  EXPECT_TRUE(s.args[2].keyword_only);
  EXPECT_EQ(s.args[2].default_value->scalar().to_int(), 1);
  EXPECT_EQ(s.to_string(), "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
}

TEST(SchemaTest, ParsesAliasAnnotationsListsOptionalsAndTupleReturns) {
  OpSchema s = parse_schema("max.dim(Tensor(a!) self, int[2] dims=[1, 2], int? k=None, ScalarType dtype=float64) -> (Tensor values, Tensor indices)");
  EXPECT_EQ(s.full_name(), "max.dim");
  EXPECT_TRUE(s.args[0].is_write);
  EXPECT_EQ(s.mutated_arg(), 0u);
  EXPECT_EQ(s.args[1].type, ArgType::IntList);
  EXPECT_EQ(s.args[1].default_value->int_list(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(s.args[2].optional);
  EXPECT_TRUE(s.args[2].default_value->is_none());
  EXPECT_EQ(s.args[3].default_value->dtype(), DType::Float64);
  ASSERT_EQ(s.returns.size(), 2u);
  EXPECT_EQ(s.returns[1].name, "indices");
  EXPECT_EQ(s.arg_index("k"), 2u);
}

TEST(SchemaTest, ViewAnnotationMarksReturnAsView) {
  EXPECT_TRUE(parse_schema("view(Tensor(a) self, SymInt[] size) -> Tensor(a)").returns_view());
  EXPECT_FALSE(parse_schema("add_(Tensor(a!) self, Tensor other) -> Tensor(a!)").returns_view());
}

TEST(SchemaTest, BadSyntaxNamesTextAndPosition) {
  try {
    parse_schema("add(Tensor self Tensor other) -> Tensor");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("bad op schema \"add(Tensor self Tensor other) -> Tensor\" at position"));
    EXPECT_THAT(e.message(), HasSubstr("expected ','"));
  }
  EXPECT_THROW(parse_schema("f(Tensr x) -> Tensor"), Error);
  EXPECT_THROW(parse_schema("f(Tensor x) -> Tensor trailing junk"), Error);
}

TEST(SchemaTest, NoneDefaultOnlyForOptionalArguments) {
  EXPECT_THROW(parse_schema("f(Tensor x, int k=None) -> Tensor"), Error);
}

TEST(DTypeTest, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::Int64, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::Int32, DType::Int64), DType::Int64);
  EXPECT_EQ(element_size(DType::Float64), 8u);
  EXPECT_EQ(dtype_from_name("int8"), DType::Int8);
  EXPECT_THROW(dtype_from_name("float16"), Error);
}

TEST(SymIntTest, ConcreteArithmeticAndComparisons) {
  SymInt a(6), b(4);
  EXPECT_EQ(int64_t(a * b), 24);
  EXPECT_EQ(int64_t(a / 4), 1);
  EXPECT_TRUE(a > b);
  EXPECT_TRUE(size_t{6} == a);
  EXPECT_FALSE(a.is_symbolic());
}

TEST(SymIntTest, SymbolicValuesDelegateToTheirNode) {
  struct Node : SymNode {
    int64_t hint() const override { return 8; }
    int64_t guard_int(const char* why) const override { QFLOW_FAIL("refused: {}", why); }
    SymInt binary(char op, const SymInt& l, const SymInt& r) const override {
      last = fmt::format("{}{}{}", l.hint(), op, r.hint());
      return SymInt(std::make_shared<Node>());
    }
    mutable std::string last;
  };
  auto node = std::make_shared<Node>();
  SymInt s(node);
  EXPECT_TRUE(s.is_symbolic());
  EXPECT_EQ(s.hint(), 8);
  SymInt t = s * 2;
  EXPECT_TRUE(t.is_symbolic());
  EXPECT_EQ(node->last, "8*2");
  EXPECT_THROW((void)int64_t(s), Error);  // a tracer refuses silent specialisation
}

TEST(TensorBasicsTest, MetadataOfAFreshTensor) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(int64_t(t.size(-1)), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kStorageAlignment, 0u);
  EXPECT_THROW(t.size(3), Error);
}

TEST(TensorBasicsTest, DataPtrChecksDtype) {
  Tensor t = zeros({2}, DType::Int32);
  EXPECT_NE(t.data_ptr<int32_t>(), nullptr);
  try {
    t.data_ptr<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("data_ptr: tensor has dtype int32, requested float32"));
  }
}

TEST(TensorBasicsTest, ItemOfOneElementAndErrorOtherwise) {
  EXPECT_EQ(full({1, 1}, 2.5).item<float>(), 2.5f);
  try {
    zeros({2}).item<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("item: expected a tensor with one element, got shape [2] (2 elements)"));
  }
}

TEST(TensorBasicsTest, FromBlobSharesCallerMemoryAndRunsDeleter) {
  std::vector<float> buf{1, 2, 3, 4, 5, 6};
  bool deleted = false;
  {
    Tensor t = from_blob(buf.data(), {2, 3}, DType::Float32, [&](void*) { deleted = true; });
    t.mul_(2.0);
  }
  EXPECT_TRUE(deleted);
  EXPECT_EQ(buf[5], 12.0f);
}

TEST(TensorBasicsTest, FactoriesFillValues) {
  EXPECT_EQ(to_vector<int64_t>(arange(5)), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(to_vector<float>(arange(0.0, 1.0, 0.25)), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(to_vector<float>(linspace(0, 1, 5)), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(full({2}, 7).dtype(), DType::Int64);
  EXPECT_EQ(to_vector<double>(ones({2}, DType::Float64)), (std::vector<double>{1, 1}));
  try {
    from_vector<float>({1, 2, 3}, {2, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("from_vector: 3 values do not fill shape [2, 2] (4 elements)"));
  }
  EXPECT_THROW(zeros({-1, 2}), Error);
}
