// Every zoo model traces; its GraphModule computes exactly what the model computes (same ops
// in the same order) in train and eval mode at another batch size than the one traced, with
// the same gradients and the same state_dict keys.
#include "fx_test_util.h"

using namespace qflow;
using namespace fxtest;

namespace {

class ZooTraceTest : public ::testing::TestWithParam<std::string> {};

// Parameter gradients after backward of a fixed weighting of the output (so every logit
// matters differently), by name.
std::vector<std::pair<std::string, std::vector<float>>> gradients(nn::Module& params, nn::Module& runner, const Tensor& x,
                                                                   const Tensor& weights) {
  params.zero_grad();
  manual_seed(11);  // Dropout draws the same masks in both runs
  (runner(x) * weights).sum().backward();
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, p] : params.named_parameters()) {
    out.emplace_back(name, p.grad().defined() ? to_vector<float>(p.grad()) : std::vector<float>{});
  }
  return out;
}

}  // namespace

TEST_P(ZooTraceTest, GraphModuleMatchesTheModelExactly) {
  manual_seed(5);
  nn::ModulePtr model = models::create(GetParam());
  auto gm = fx::symbolic_trace(model, randn({1, 3, 32, 32}));
  EXPECT_NO_THROW(gm->recompile());
  EXPECT_EQ(gm->state_dict().keys(), model->state_dict().keys());

  const Tensor x = randn({3, 3, 32, 32});
  for (bool training : {true, false}) {
    model->train(training);
    gm->train(training);
    NoGradGuard no_grad;
    manual_seed(9);
    const Tensor want = (*model)(x);
    manual_seed(9);
    const Tensor got = (*gm)(x);
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{3, 10}));
    EXPECT_TRUE(same_values(got, want)) << GetParam() << (training ? " train" : " eval");
  }
}

TEST_P(ZooTraceTest, GradientsThroughTheGraphModuleEqualTheModels) {
  manual_seed(6);
  nn::ModulePtr model = models::create(GetParam());
  auto gm = fx::symbolic_trace(model, randn({1, 3, 32, 32}));
  model->train();
  gm->train();
  const Tensor x = randn({2, 3, 32, 32});
  const Tensor weights = randn({2, 10});
  const auto eager = gradients(*model, *model, x, weights);
  const auto traced = gradients(*model, *gm, x, weights);
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(traced[i].first, eager[i].first);
    EXPECT_FALSE(eager[i].second.empty()) << eager[i].first;
    EXPECT_TRUE(traced[i].second == eager[i].second) << GetParam() << ": " << eager[i].first;
  }
}

TEST(ZooTraceShapeTest, ResNet18TracedAtBatchOneRunsAtBatchThree) {
  manual_seed(1);
  nn::ModulePtr model = models::create("resnet18");
  auto gm = fx::symbolic_trace(model, randn({1, 3, 32, 32}));
  const fx::Node& view = gm->graph().node("view");
  ASSERT_TRUE(view.args()[1].is_int_list());
  EXPECT_EQ(fx::format_argument(view.args()[1]), "[%sym_size, -1]");
  EXPECT_EQ(gm->graph().node("linear").meta().shape(), (std::vector<int64_t>{1, 10}));
  model->eval();
  gm->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({3, 3, 32, 32});
  EXPECT_TRUE(same_values((*gm)(x), (*model)(x)));
  size_t convs = 0;
  for (const fx::Node* n : gm->graph())
    if (n->op() == fx::NodeOp::CallModule && gm->get_submodule(n->target())->type_name() == "Conv2d") ++convs;
  EXPECT_EQ(convs, 20u);  // 1 stem + 16 in blocks + 3 shortcut projections
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTraceTest, ::testing::ValuesIn(models::model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
