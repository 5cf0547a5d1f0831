// Anomaly detection (Note [Anomaly detection]): the first NaN/Inf of a forward or backward
// pass throws, naming the op or backward node, the output, the counts and the scope.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "qflow/qflow.h"
#include "error_of.h"

using namespace qflow;
using autograd::AnomalyScope;
using autograd::DetectAnomalyGuard;
using ::testing::HasSubstr;

namespace {

using ::qflow::testing_util::error_of;  // tests/error_of.h

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST(AnomalyTest, DescribesNonFiniteValuesByKindAndCount) {
  using autograd::describe_non_finite;
  EXPECT_EQ(describe_non_finite(from_vector<float>({1, 2, 3})), "");
  EXPECT_EQ(describe_non_finite(from_vector<double>({kNan, 1, kInf, -kInf, 0})), "nan in 1 and inf in 2 of 5 elements");
  EXPECT_EQ(describe_non_finite(from_vector<float>({1, std::numeric_limits<float>::infinity()}, {1, 2})),
            "inf in 1 of 2 elements");
  EXPECT_EQ(describe_non_finite(from_vector<double>({kNan, kNan, 2}).view({3, 1}).expand({3, 2})),
            "nan in 4 of 6 elements");  // non-contiguous views are counted per element
  EXPECT_EQ(describe_non_finite(from_vector<int64_t>({1, 2})), "");
  EXPECT_EQ(describe_non_finite(Tensor()), "");
}

TEST(AnomalyTest, OffByDefaultSoNanFlowsSilently) {
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  Tensor x = from_vector<double>({1, -1}).requires_grad_();
  Tensor y = x.sqrt();
  EXPECT_TRUE(std::isnan(to_vector<double>(y)[1]));
  y.sum().backward();
  EXPECT_TRUE(std::isnan(to_vector<double>(x.grad())[1]));
}

TEST(AnomalyTest, GuardSetsAndRestoresTheSwitch) {
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    {
      DetectAnomalyGuard off(false);
      EXPECT_FALSE(autograd::is_anomaly_enabled());
    }
    EXPECT_TRUE(autograd::is_anomaly_enabled());
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(true);
  EXPECT_TRUE(autograd::is_anomaly_enabled());
  autograd::set_detect_anomaly(false);
}

TEST(AnomalyTest, ForwardNamesTheOpThatProducedTheFirstNan) {
  DetectAnomalyGuard anomaly;
  Tensor x = from_vector<double>({1, -1}).requires_grad_();
  EXPECT_EQ(error_of([&] { (void)(x * 2.0).sqrt(); }),
            "detect_anomaly: forward: op 'sqrt' returned nan in 1 of 2 elements in output 0 of shape [2]; all its inputs "
            "were finite, so this op produced it");
  // Inside a scope the report names it.
  AnomalyScope scope("module 'block.act' (Sqrt)");
  EXPECT_THAT(error_of([&] { (void)x.sqrt(); }),
              HasSubstr("op 'sqrt' in module 'block.act' (Sqrt) returned nan in 1 of 2 elements"));
}

TEST(AnomalyTest, ForwardSaysWhenTheValueCameFromAnInput) {
  DetectAnomalyGuard anomaly;
  Tensor w = from_vector<double>({kInf, 1}).requires_grad_();
  EXPECT_EQ(error_of([&] { (void)(w * 3.0); }),
            "detect_anomaly: forward: op 'mul.Scalar' returned inf in 1 of 2 elements in output 0 of shape [2]; its input "
            "0 (shape [2]) already held inf in 1 of 2 elements: the value came from outside the checked ops (a parameter, "
            "a buffer or the data)");
}

TEST(AnomalyTest, BackwardNamesTheNodeAndTheScopeItsOpRanIn) {
  DetectAnomalyGuard anomaly;
  // sqrt is finite at 0, its derivative 1 / (2 sqrt(x)) is not.
  Tensor x = from_vector<double>({0, 4}).requires_grad_();
  Tensor y;
  {
    AnomalyScope scope("module 'layer2.1' (Sqrt)");
    y = x.sqrt();
  }
  Tensor loss = (y * 3.0).sum();
  EXPECT_EQ(error_of([&] { loss.backward(); }),
            "detect_anomaly: backward: 'SqrtBackward' (of an op that ran in module 'layer2.1' (Sqrt)) returned inf in 1 of "
            "2 elements in the gradient of its input 0 (shape [2]); the gradients it received were finite");
}

TEST(AnomalyTest, BackwardRefusesANonFiniteRootGradient) {
  DetectAnomalyGuard anomaly;
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  Tensor y = x * 2.0;
  EXPECT_EQ(error_of([&] { y.backward(from_vector<double>({kNan, 1})); }),
            "detect_anomaly: backward: the gradient given for root 0 holds nan in 1 of 2 elements");
}

TEST(AnomalyTest, FiniteComputationsGiveTheSameValuesAndGradients) {
  DetectAnomalyGuard anomaly;
  Tensor x = from_vector<double>({1, 4}).requires_grad_();
  Tensor y = x.sqrt();
  y.sum().backward();
  EXPECT_EQ(to_vector<double>(y), (std::vector<double>{1, 2}));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{0.5, 0.25}));
  // Ops that record no gradient are not checked (nothing requires grad here).
  EXPECT_TRUE(std::isnan(to_vector<double>(from_vector<double>({-1}).sqrt())[0]));
}
