// Post-accumulate-grad hooks (Note [Post-accumulate-grad hooks]): the autograd feature
// DistributedDataParallel is built on.
#include <gtest/gtest.h>

#include "qflow/qflow.h"

namespace qflow::autograd {
namespace {

TEST(PostAccumulateGradHook, RunsOnceWithTheCompleteGradient) {
  Tensor w = from_vector<float>({1, 2}).requires_grad_();
  std::vector<std::vector<float>> seen;
  auto handle = register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.is_same(w));
    seen.push_back(to_vector<float>(leaf.grad()));
  });
  // w reaches the loss along two paths: the hook sees their sum, once.
  ((w * 3.0).sum() + (w * w).sum()).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{5, 7}));
  // A second backward accumulates, and the hook sees the accumulated .grad.
  (w * 2.0).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{7, 9}));
  handle.remove();
  (w * 2.0).sum().backward();
  EXPECT_EQ(seen.size(), 2u);
}

TEST(PostAccumulateGradHook, RemovedWithItsHandleAndRunInRegistrationOrder) {
  Tensor w = ones({1}).requires_grad_();
  std::string order;
  {
    auto a = register_post_accumulate_grad_hook(w, [&](const Tensor&) { order += "a"; });
    auto b = register_post_accumulate_grad_hook(w, [&](const Tensor&) { order += "b"; });
    w.sum().backward();
  }
  w.sum().backward();  // both handles are gone
  EXPECT_EQ(order, "ab");
  // Not for autograd::grad, which never writes .grad.
  auto c = register_post_accumulate_grad_hook(w, [&](const Tensor&) { order += "c"; });
  (void)grad({(w * 2.0).sum()}, {w});
  EXPECT_EQ(order, "ab");
}

TEST(PostAccumulateGradHook, RefusesNonLeaves) {
  Tensor w = ones({2}).requires_grad_();
  const Tensor y = w * 2.0;
  try {
    (void)register_post_accumulate_grad_hook(y, [](const Tensor&) {});
    FAIL() << "a non-leaf was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("is the result of an op"), std::string::npos) << e.message();
  }
  EXPECT_THROW((void)register_post_accumulate_grad_hook(ones({2}), [](const Tensor&) {}), Error);
}

}  // namespace
}  // namespace qflow::autograd
