// Every registered op is accounted for twice: autograd has a derivative rule or a declaration
// for it (Note [Derivatives read arguments by name]), and the exporter a converter or a declared
// refusal (Note [ONNX coverage]). This is the lowest test binary that sees both registries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "error_of.h"
#include "qflow/autograd/derivatives.h"
#include "qflow/core/op_registry.h"
#include "qflow/onnx/export.h"
#include "qflow/qflow.h"

using namespace qflow;
using ::qflow::testing_util::error_of;
using ::testing::HasSubstr;

namespace {

/// The op export_errors_test registers to check the error for an op nobody accounted for.
const std::set<std::string> kTestOnlyOps = {"coverage_test_unaccounted"};

std::vector<const OpDef*> registered_ops() {
  std::vector<const OpDef*> ops;
  for (const OpDef* op : OpRegistry::instance().all())
    if (!kTestOnlyOps.count(op->name)) ops.push_back(op);
  return ops;
}

bool has_tensor_argument(const OpSchema& schema) {
  for (const ArgSpec& a : schema.args)
    if (a.type == ArgType::Tensor || a.type == ArgType::TensorList) return true;
  return false;
}

/// Why autograd can take `op`, or "" when it cannot.
std::string derivative_coverage(const OpDef& op) {
  const auto& registry = autograd::DerivativeRegistry::instance();
  if (registry.find(op.name)) return "rule or declaration";
  // Without a tensor argument no input can require grad: autograd never records the op.
  if (!has_tensor_argument(op.schema)) return "no tensor argument";
  if (op.schema.mutated_arg()) {
    // Differentiated through its out-of-place twin (Note [In-place ops under autograd]).
    const std::string twin = autograd::inplace_twin(op.schema);
    if (twin.empty()) return "handled by the autograd layer";
    const autograd::DerivativeRule* rule = registry.find(twin);
    if (rule && rule->differentiable()) return "its twin " + twin;
  }
  return "";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The coverage checks below pass vacuously over empty registries (say, registration objects
// dropped by the linker, Note [Op registration]): each registry must hold at least this many
// entries. Floors well below today's counts, so adding or merging ops never trips them.
TEST(OpCoverageTest, TheRegistriesAreFilled) {
  const size_t ops = registered_ops().size(), derivatives = autograd::DerivativeRegistry::instance().all().size();
  const size_t converters = onnx::converted_ops().size(), refusals = onnx::refused_ops().size();
  std::printf("[ coverage ] %zu ops, %zu derivative rules and declarations, %zu ONNX converters, %zu refusals\n", ops,
              derivatives, converters, refusals);
  EXPECT_GE(ops, 100u);         // 154 when this was written
  EXPECT_GE(derivatives, 80u);  // 132 rules and declarations
  EXPECT_GE(converters, 20u);   // 35 converters (and 119 declared refusals)
  EXPECT_GE(converters + refusals, ops);  // every op is one or the other (checked by name below)
}

TEST(OpCoverageTest, EveryOpHasADerivativeOrIsDeclaredWithout) {
  std::vector<std::string> missing;
  for (const OpDef* op : registered_ops())
    if (derivative_coverage(*op).empty()) missing.push_back(op->name);
  EXPECT_TRUE(missing.empty()) << "ops with neither a derivative rule nor a non_differentiable / no_derivative "
                                  "declaration: "
                               << join(missing);
}

TEST(OpCoverageTest, EveryDerivativeNamesARegisteredOpAndDeclarationsGiveAReason) {
  std::vector<std::string> unknown, unexplained;
  for (const autograd::DerivativeRule* rule : autograd::DerivativeRegistry::instance().all()) {
    if (!OpRegistry::instance().find(rule->op)) unknown.push_back(rule->op);
    if (!rule->differentiable() && rule->reason.empty()) unexplained.push_back(rule->op);
  }
  EXPECT_TRUE(unknown.empty()) << "derivatives or declarations of ops that are not registered: " << join(unknown);
  EXPECT_TRUE(unexplained.empty()) << "declarations without a reason: " << join(unexplained);
}

TEST(OpCoverageTest, EveryRuleResolvesItsSavedArgumentsAgainstItsSchema) {
  // Resolution happens on an op's first recorded call; here for every rule at once, so a
  // misspelt name in save_inputs fails this test instead of someone's first backward.
  std::vector<std::string> failures;
  for (const autograd::DerivativeRule* rule : autograd::DerivativeRegistry::instance().all()) {
    if (!rule->differentiable() || !OpRegistry::instance().find(rule->op)) continue;
    const std::string error = error_of([&] { rule->resolved(); });
    if (!error.empty()) failures.push_back(error);
  }
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(OpCoverageTest, EveryOpHasAnOnnxConverterOrADeclaredRefusal) {
  const std::vector<std::string> converted = onnx::converted_ops();
  const std::set<std::string> converters(converted.begin(), converted.end());
  const std::map<std::string, std::string> refused = onnx::refused_ops();
  std::vector<std::string> missing, both;
  for (const OpDef* op : registered_ops()) {
    const bool c = converters.count(op->name) > 0, r = refused.count(op->name) > 0;
    if (!c && !r) missing.push_back(op->name);
    if (c && r) both.push_back(op->name);
  }
  EXPECT_TRUE(missing.empty()) << "ops with neither an ONNX converter nor a declared refusal: " << join(missing);
  EXPECT_TRUE(both.empty()) << "ops with a converter and a refusal: " << join(both);
}

TEST(OpCoverageTest, ConvertersAndRefusalsNameRegisteredOpsWithReasons) {
  std::vector<std::string> unknown, unexplained;
  for (const std::string& name : onnx::converted_ops())
    if (!OpRegistry::instance().find(name)) unknown.push_back(name);
  for (const auto& [name, reason] : onnx::refused_ops()) {
    if (!OpRegistry::instance().find(name)) unknown.push_back(name);
    if (reason.empty()) unexplained.push_back(name);
  }
  EXPECT_TRUE(unknown.empty()) << "ONNX converters or refusals of ops that are not registered: " << join(unknown);
  EXPECT_TRUE(unexplained.empty()) << "refusals without a reason: " << join(unexplained);
}

TEST(OpCoverageTest, DeclaringAnOpTwiceIsAnError) {
  auto& registry = autograd::DerivativeRegistry::instance();
  EXPECT_THAT(error_of([&] { registry.non_differentiable({"argmax"}, "integer indices"); }),
              HasSubstr("derivative of 'argmax' is registered or declared twice"));
  EXPECT_THAT(error_of([&] { registry.no_derivative({"relu"}, "a second opinion"); }),
              HasSubstr("derivative of 'relu' is registered or declared twice"));
  EXPECT_THAT(error_of([&] { registry.no_derivative({"coverage_test_reasonless"}, ""); }),
              HasSubstr("op 'coverage_test_reasonless' is declared without a derivative but no reason"));
}

}  // namespace
