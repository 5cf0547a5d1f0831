// Derivative rules read the forward op's arguments by schema name (Note [Derivatives read
// arguments by name]): a rule written that way differentiates correctly, and every misuse —
// a misspelt argument or saved name, a tensor read as a non-tensor, an op nobody accounted
// for, an op declared without a derivative — fails with an error naming the op and the name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qflow/autograd/derivatives.h"
#include "qflow/core/op_registry.h"
#include "qflow/qflow.h"

using namespace qflow;
using autograd::BackwardContext;
using ::qflow::testing_util::error_of;
using ::testing::HasSubstr;

namespace {

// Test ops on float64 tensors: out = self * factor (+ other when given). The kernels compute
// on host vectors, so nothing in them goes back through the dispatcher.
std::vector<TensorMeta> like_self(const OpArgs& args) {
  const Tensor& self = args.tensor("self");
  return {{self.sizes(), self.dtype()}};
}
Stack scale_kernel(OpArgs& args) {
  const Tensor& self = args.tensor("self");
  std::vector<double> v = to_vector<double>(self);
  const double factor = args.to_double("factor");
  for (double& x : v) x *= factor;
  return {Value(from_vector<double>(v, self.sizes()))};
}

TensorList scale_rule(const BackwardContext& ctx, const TensorList& g) {
  return ctx.gradients({{"self", mul(g[0], Scalar(ctx.arg("factor").to_double()))}});
}
TensorList misspelt_arg_rule(const BackwardContext& ctx, const TensorList& g) {
  return {mul(g[0], Scalar(ctx.arg("factr").to_double()))};
}
TensorList tensor_as_arg_rule(const BackwardContext& ctx, const TensorList& g) {
  return {mul(g[0], Scalar(ctx.arg("self").to_double()))};
}
TensorList unsaved_input_rule(const BackwardContext& ctx, const TensorList& g) { return {mul(g[0], ctx.input("self"))}; }

// Registered once, on first use, beside this file's rules.
void register_test_ops() {
  static const bool done = [] {
    auto& ops = OpRegistry::instance();
    auto& derivatives = autograd::DerivativeRegistry::instance();
    for (const char* name : {"by_name_scale", "by_name_misspelt_arg", "by_name_bad_save", "by_name_tensor_as_arg",
                             "by_name_unsaved", "by_name_undeclared"})
      ops.def(std::string(name) + "(Tensor self, float factor=2.0) -> Tensor", like_self, scale_kernel);
    derivatives.def("by_name_scale", {.node_name = "ByNameScaleBackward", .backward = scale_rule});
    derivatives.def("by_name_misspelt_arg", {.node_name = "MisspeltBackward", .backward = misspelt_arg_rule});
    derivatives.def("by_name_bad_save", {.node_name = "BadSaveBackward",
                                         .save_inputs = autograd::save_inputs({"slef"}),
                                         .backward = scale_rule});
    derivatives.def("by_name_tensor_as_arg", {.node_name = "TensorAsArgBackward", .backward = tensor_as_arg_rule});
    derivatives.def("by_name_unsaved", {.node_name = "UnsavedBackward", .backward = unsaved_input_rule});
    return true;
  }();
  (void)done;
}

Tensor input() { return from_vector<double>({0.5, -1.25, 2.0}).requires_grad_(); }

Tensor call(const char* op, const Tensor& x, double factor = 3.0) {
  return call_op(op, {Value(x), Value(factor)}).at(0).tensor();
}

TEST(DerivativesByNameTest, ARuleReadingArgumentsByNameDifferentiates) {
  register_test_ops();
  EXPECT_TRUE(gradcheck([](const TensorList& x) { return call("by_name_scale", x[0]); }, {input()}));
  // The default of an omitted argument is what the rule reads.
  Tensor x = input();
  call_op("by_name_scale", {Value(x)}).at(0).tensor().sum().backward();
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{2.0, 2.0, 2.0}));
}

TEST(DerivativesByNameTest, AnUnknownArgumentNameNamesTheOpAndTheSchemaArguments) {
  register_test_ops();
  Tensor y = call("by_name_misspelt_arg", input()).sum();
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("derivative of 'by_name_misspelt_arg': no argument named 'factr' in its schema "
                        "by_name_misspelt_arg(Tensor self, float factor=2) -> Tensor (arguments: self, factor)"));
}

TEST(DerivativesByNameTest, AMisspeltSavedNameFailsAtTheFirstRecordedCall) {
  register_test_ops();
  EXPECT_THAT(error_of([] { call("by_name_bad_save", input()); }),
              HasSubstr("derivative of 'by_name_bad_save': save_inputs names 'slef', which is not a tensor argument "
                        "of by_name_bad_save(Tensor self, float factor=2) -> Tensor (arguments: self, factor)"));
  // Still failing the next time: the rule never half-resolves.
  EXPECT_THAT(error_of([] { call("by_name_bad_save", input()); }), HasSubstr("save_inputs names 'slef'"));
}

TEST(DerivativesByNameTest, ReadingATensorAsAnArgumentOrAnUnsavedInputIsAnError) {
  register_test_ops();
  Tensor a = call("by_name_tensor_as_arg", input()).sum();
  EXPECT_THAT(error_of([&] { a.backward(); }),
              HasSubstr("TensorAsArgBackward: argument 'self' of by_name_tensor_as_arg is a tensor; read it with "
                        "input()"));
  Tensor b = call("by_name_unsaved", input()).sum();
  EXPECT_THAT(error_of([&] { b.backward(); }),
              HasSubstr("UnsavedBackward: input 'self' was not saved by its derivative rule (add it to save_inputs)"));
}

TEST(DerivativesByNameTest, AnOpWithoutRuleOrDeclarationIsRefusedUnderAutograd) {
  register_test_ops();
  EXPECT_THAT(error_of([] { call("by_name_undeclared", input()); }),
              HasSubstr("by_name_undeclared: the derivative of this op is not implemented (it has no derivative rule "
                        "and is not declared non-differentiable)"));
  // Without grad it simply runs.
  EXPECT_EQ(to_vector<double>(call("by_name_undeclared", from_vector<double>({1.0}))), (std::vector<double>{3.0}));
}

TEST(DerivativesByNameTest, AnOpDeclaredWithoutDerivativeIsRefusedWithItsReason) {
  Tensor out = softmax(input(), 0).detach();
  const std::string msg = error_of([&] { softmax_backward(input(), out, 0); });
  EXPECT_THAT(msg, HasSubstr("softmax_backward: has no derivative (" + std::string(autograd::kNoDoubleBackward) + ")"));
}

TEST(DerivativesByNameTest, ANonDifferentiableOpRunsAndItsOutputCarriesNoGradient) {
  const Tensor idx = argmax(input());
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_EQ(idx.item<int64_t>(), 2);
  EXPECT_EQ(autograd::DerivativeRegistry::instance().find("argmax")->reason, "integer indices");
}

TEST(DerivativesByNameTest, TensorListArgumentsAreReadByNameAndIndex) {
  // cat's rule reads `tensors` with list_size / input_sizes(name, k) / needs_grad(name, k).
  Tensor a = input(), b = from_vector<double>({1.0, 2.0}).requires_grad_();
  Tensor c = from_vector<double>({4.0});
  cat({a, c, b}).mul(from_vector<double>({1, 2, 3, 4, 5, 6})).sum().backward();
  EXPECT_EQ(to_vector<double>(a.grad()), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{5, 6}));
}

}  // namespace
