// Optimizers and schedules against torch.optim (PyTorch 1.13 goldens, float64).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "qflow/nn/optim/adam.h"
#include "qflow/nn/optim/lr_scheduler.h"
#include "qflow/nn/optim/sgd.h"
#include "qflow/qflow.h"

using namespace qflow;
using namespace qflow::nn::optim;
using ::testing::HasSubstr;

namespace {

struct Problem {
  Tensor p = from_vector<double>({1.0, -2.0, 3.0, 0.5}).requires_grad_();
  Tensor q = from_vector<double>({0.25, -0.75}, {1, 2}).requires_grad_();
  Tensor target = from_vector<double>({0.5, 0.5, -1.0, 2.0});

  // The same hand-made gradients the PyTorch script sets: 2(p − t)(p + 1.5) and 3q + 0.1.
  void set_grads() {
    NoGradGuard no_grad;
    p.set_grad((p - target).mul(2.0).mul(p + 1.5));
    q.set_grad(q * 3.0 + 0.1);
  }
  template <typename Opt, typename Options>
  void run(Options defaults, int steps = 5) {
    Options second = defaults;
    second.lr = 0.05;
    Opt opt(std::vector<typename Opt::Group>{{{p}, defaults}, {{q}, second}});
    for (int i = 0; i < steps; ++i) {
      opt.zero_grad();
      set_grads();
      opt.step();
    }
  }
};

void expect_close(const Tensor& t, const std::vector<double>& want) {
  const auto got = to_vector<double>(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * std::max(1.0, std::abs(want[i]))) << i;
}

}  // namespace

TEST(SGDTest, MomentumDampeningWeightDecayMatchPyTorch) {
  Problem pr;
  pr.run<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 5e-4});
  expect_close(pr.p, {0.02566311585315971, -19.91432235971534, -98.05960396793267, 2.2267463770543316});
  expect_close(pr.q, {-0.11871756609000483, 0.1826640625564407});
}

TEST(SGDTest, NesterovMatchesPyTorch) {
  Problem pr;
  pr.run<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  expect_close(pr.p, {0.4061679847716471, -421.87233368775145, -115126.68261869415, 1.9589278950884754});
  expect_close(pr.q, {-0.1267212076757804, 0.20290912154777974});
}

TEST(AdamTest, MatchesPyTorchWithL2WeightDecay) {
  Problem pr;
  pr.run<Adam>(AdamOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.01});
  expect_close(pr.p, {0.5410250905536752, -2.505787837641498, 2.5039260663929266, 0.9977755391339491});
  expect_close(pr.q, {0.014138233872149096, -0.503380371161691});
}

TEST(AdamWTest, MatchesPyTorchWithDecoupledWeightDecay) {
  Problem pr;
  pr.run<AdamW>(AdamOptions{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.01});
  expect_close(pr.p, {0.5378488640106204, -2.494832082518951, 2.4900856346672793, 0.994321560566142});
  expect_close(pr.q, {0.013799890818232984, -0.5017878405851508});
}

TEST(OptimizerStateTest, ResumingFromStateDictContinuesBitIdentically) {
  Problem straight, resumed;
  straight.run<Adam>(AdamOptions{.lr = 0.1}, 4);

  Adam first(std::vector<Tensor>{resumed.p, resumed.q}, AdamOptions{.lr = 0.1});
  for (int i = 0; i < 2; ++i) {
    resumed.set_grads();
    first.step();
  }
  const NamedTensors state = first.state_dict();
  Adam second(std::vector<Tensor>{resumed.p, resumed.q}, AdamOptions{.lr = 123.0});  // lr restored from state
  second.load_state_dict(state);
  EXPECT_EQ(second.lr(0), 0.1);
  for (int i = 0; i < 2; ++i) {
    resumed.set_grads();
    second.step();
  }
  Problem ref;
  Adam ref_opt(std::vector<Tensor>{ref.p, ref.q}, AdamOptions{.lr = 0.1});
  for (int i = 0; i < 4; ++i) {
    ref.set_grads();
    ref_opt.step();
  }
  EXPECT_EQ(to_vector<double>(resumed.p), to_vector<double>(ref.p));
  EXPECT_EQ(to_vector<double>(resumed.q), to_vector<double>(ref.q));
}

TEST(OptimizerStateTest, MismatchedStateIsRefusedAndLeavesOptimizerUnchanged) {
  Problem pr;
  SGD opt(std::vector<Tensor>{pr.p}, SGDOptions{.lr = 0.1, .momentum = 0.9});
  NamedTensors bad{{"param_groups.0.lr", scalar_tensor(0.5, DType::Float64)}};
  try {
    opt.load_state_dict(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("optimizer.load_state_dict: missing or malformed entry 'param_groups.0.momentum'"));
  }
  EXPECT_EQ(opt.lr(0), 0.1);
}

// Found by fuzz/fuzz_checkpoint.cpp: before these checks, a renamed buffer loaded and the next
// step() failed on an undefined tensor; a malformed index threw std::invalid_argument.
TEST(OptimizerStateTest, BuffersStepWouldNotFindAreRefused) {
  Problem pr;
  Adam source(std::vector<Tensor>{pr.p, pr.q}, AdamOptions{.lr = 0.1});
  pr.set_grads();
  source.step();
  const NamedTensors good = source.state_dict();
  auto error_with = [&](const std::string& key, const Tensor& value, bool drop = false) {
    NamedTensors state;
    for (const auto& [k, v] : good)
      if (k != key) state.emplace_back(k, v);
    if (!drop) state.emplace_back(key, value);
    Adam target(std::vector<Tensor>{pr.p, pr.q}, AdamOptions{.lr = 0.7});
    try {
      target.load_state_dict(state);
    } catch (const Error& e) {
      EXPECT_EQ(target.lr(0), 0.7);  // unchanged
      return e.message();
    }
    return std::string();
  };
  const Tensor p_like = zeros({4}, DType::Float64);
  EXPECT_EQ(error_with("state.1.expWavg", p_like),
            "optimizer.load_state_dict: unknown entry 'state.1.expWavg' (this optimizer keeps exp_avg, exp_avg_sq, step)");
  EXPECT_EQ(error_with("state.x.exp_avg", p_like),
            "optimizer.load_state_dict: malformed key 'state.x.exp_avg' (expected state.<parameter number>.<buffer>)");
  EXPECT_EQ(error_with("state.99999999999999999999.exp_avg", p_like),
            "optimizer.load_state_dict: malformed key 'state.99999999999999999999.exp_avg' (expected state.<parameter "
            "number>.<buffer>)");
  EXPECT_EQ(error_with("state.0.exp_avg", zeros({1}, DType::Float64)),
            "optimizer.load_state_dict: 'state.0.exp_avg' has dtype float64 and shape [1] but parameter 0 has dtype "
            "float64 and shape [4]");
  EXPECT_EQ(error_with("state.0.exp_avg", zeros({4}, DType::Float32)),
            "optimizer.load_state_dict: 'state.0.exp_avg' has dtype float32 and shape [4] but parameter 0 has dtype "
            "float64 and shape [4]");
  EXPECT_EQ(error_with("state.0.step", scalar_tensor(int64_t{1}, DType::Int64)),
            "optimizer.load_state_dict: 'state.0.step' must be one float64, got dtype int64 and shape []");
  EXPECT_EQ(error_with("state.1.exp_avg_sq", Tensor(), /*drop=*/true),
            "optimizer.load_state_dict: the state of parameter 1 has 2 of its 3 buffers (exp_avg, exp_avg_sq, step); it "
            "needs all or none");
  for (const auto& [k, v] : good) {
    if (k == "state.0.exp_avg") {
      EXPECT_EQ(error_with(k, v), "");  // the valid dict still loads
    }
  }
}

TEST(LRSchedulerTest, DamagedStepCountIsRefused) {
  Problem pr;
  SGD opt(std::vector<Tensor>{pr.p}, SGDOptions{.lr = 0.1});
  StepLR sched(opt, 1, 0.5);
  auto error_with = [&](const Tensor& last_step) {
    try {
      sched.load_state_dict({{"last_step", last_step}, {"base_lr.0", scalar_tensor(0.1, DType::Float64)}});
    } catch (const Error& e) {
      return e.message();
    }
    return std::string();
  };
  EXPECT_EQ(error_with(scalar_tensor(2.5, DType::Float64)),
            "lr_scheduler.load_state_dict: 'last_step' must be int64, got float64");
  EXPECT_EQ(error_with(scalar_tensor(std::numeric_limits<int64_t>::max(), DType::Int64)),
            "lr_scheduler.load_state_dict: 'last_step' is 9223372036854775807");
  EXPECT_EQ(error_with(scalar_tensor(int64_t{-1}, DType::Int64)), "lr_scheduler.load_state_dict: 'last_step' is -1");
  EXPECT_EQ(sched.last_step(), 0);
  EXPECT_EQ(error_with(scalar_tensor(int64_t{2}, DType::Int64)), "");
  EXPECT_EQ(sched.last_step(), 2);
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.025);
}

TEST(OptimizerTest, ParameterInTwoGroupsIsRefused) {
  Tensor p = zeros({2}, DType::Float64).requires_grad_();
  EXPECT_THROW(SGD(std::vector<SGD::Group>{{{p}, {}}, {{p}, {}}}), Error);
}

TEST(LRSchedulerTest, CosineAnnealingMatchesPyTorchIncludingPastTMax) {
  Tensor p = zeros({1}, DType::Float64).requires_grad_();
  SGD opt(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1});
  CosineAnnealingLR sched(opt, 10, 0.001);
  const std::vector<double> want{0.1, 0.09757729755661011, 0.0905463412215599, 0.07959536998847742, 0.0657963412215599, 0.0505,
                                 0.03520365877844011, 0.02140463001152259, 0.010453658778440109, 0.0034227024433899004,
                                 0.001, 0.0034227024433899004};
  for (double lr : want) {
    EXPECT_NEAR(opt.lr(0), lr, 1e-15);
    sched.step();
  }
}

TEST(LRSchedulerTest, MultiStepMatchesPyTorch) {
  Tensor p = zeros({1}, DType::Float64).requires_grad_();
  SGD opt(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1});
  MultiStepLR sched(opt, {2, 5}, 0.1);
  for (double lr : {0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001}) {
    EXPECT_NEAR(opt.lr(0), lr, 1e-15);
    sched.step();
  }
}

TEST(LRSchedulerTest, WarmupComposesWithStepDecayAndSurvivesACheckpoint) {
  Tensor p = zeros({1}, DType::Float64).requires_grad_();
  SGD opt(std::vector<Tensor>{p}, SGDOptions{.lr = 1.0});
  auto warm = std::make_shared<LinearWarmup>(opt, 4, 0.2);
  auto decay = std::make_shared<StepLR>(opt, 3, 0.5);
  ChainedScheduler sched(opt, {warm, decay});
  std::vector<double> seen;
  for (int i = 0; i < 7; ++i) {
    seen.push_back(opt.lr(0));
    sched.step();
  }
  // warm-up factors 0.2, 0.4, 0.6, 0.8, 1, 1, 1 times step factors 1, 1, 1, .5, .5, .5, .25
  const std::vector<double> want{0.2, 0.4, 0.6, 0.4, 0.5, 0.5, 0.25};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(seen[i], want[i], 1e-12) << i;

  const NamedTensors state = sched.state_dict();
  SGD opt2(std::vector<Tensor>{p}, SGDOptions{.lr = 1.0});
  auto warm2 = std::make_shared<LinearWarmup>(opt2, 4, 0.2);
  auto decay2 = std::make_shared<StepLR>(opt2, 3, 0.5);
  ChainedScheduler resumed(opt2, {warm2, decay2});
  resumed.load_state_dict(state);
  EXPECT_EQ(resumed.last_step(), 7);
  EXPECT_NEAR(opt2.lr(0), 0.25, 1e-12);
}
