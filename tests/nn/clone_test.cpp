// Module::clone: deep, independent copies whose members point at the cloned entries.
#include "test_modules.h"

using namespace qflow;
using namespace qflow::nn;
using namespace qflow::nn::testing;
using ::testing::HasSubstr;

TEST(CloneTest, CloneHasIndependentParametersAndRebindsMembers) {
  auto net = std::make_shared<Net>();
  fill(net->stem->weight, 7.0f);  // changed after construction: the clone must copy, not re-initialize
  auto copy = std::dynamic_pointer_cast<Net>(net->clone());
  ASSERT_NE(copy, nullptr);

  // The clone's members are its own registered children and tensors.
  EXPECT_NE(copy->stem.get(), net->stem.get());
  EXPECT_EQ(copy->stem.get(), copy->get_submodule("stem").get());
  EXPECT_EQ(copy->layer1.get(), copy->get_submodule("layer1").get());
  EXPECT_EQ(copy->layer1->at<Block>(0)->a1.get(), copy->get_submodule("layer1.0.a1").get());
  EXPECT_TRUE(copy->stem->weight.is_same(copy->get_parameter("stem.weight")));
  EXPECT_TRUE(copy->scale.is_same(copy->get_parameter("scale")));
  EXPECT_TRUE(copy->stem->calls.is_same(copy->get_buffer("stem.calls")));
  EXPECT_FALSE(copy->stem->weight.is_same(net->stem->weight));
  EXPECT_EQ(to_vector<float>(copy->stem->weight), (std::vector<float>{7, 7, 7}));
  EXPECT_TRUE(copy->stem->weight.requires_grad());
  EXPECT_TRUE(copy->stem->weight.is_leaf());

  // Modifying the clone leaves the original alone, and the clone's forward uses its own data.
  fill(copy->stem->weight, 1.0f);
  fill(copy->layer1->at<Block>(1)->a2->bias, 5.0f);
  Tensor x = from_vector<float>({1, 2, 3});
  EXPECT_EQ(to_vector<float>((*net)(x)), (std::vector<float>{14, 28, 42}));
  EXPECT_EQ(to_vector<float>((*copy)(x)), (std::vector<float>{12, 14, 16}));
  EXPECT_EQ(to_vector<float>(net->stem->weight), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(to_vector<float>(net->layer1->at<Block>(1)->a2->bias), (std::vector<float>{0, 0, 0}));
}

TEST(CloneTest, CloneIsGraphIndependentAndStartsWithoutGrads) {
  Block block;
  block(from_vector<float>({1, 2, 3})).backward(ones({3}));
  ASSERT_TRUE(block.a1->weight.grad().defined());
  auto copy = std::dynamic_pointer_cast<Block>(block.clone());
  for (const Tensor& p : copy->parameters()) {
    EXPECT_TRUE(p.is_leaf());
    EXPECT_FALSE(p.grad().defined());
  }
  copy->operator()(from_vector<float>({1, 1, 1})).backward(ones({3}));
  EXPECT_EQ(to_vector<float>(block.a1->weight.grad()), (std::vector<float>{1, 2, 3}));  // untouched
}

TEST(CloneTest, ClonePreservesModeAndRequiresGradFlags) {
  Block block;
  block.a2->bias.requires_grad_(false);
  block.eval();
  block.a2->train();
  auto copy = std::dynamic_pointer_cast<Block>(block.clone());
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE(copy->a1->is_training());
  EXPECT_TRUE(copy->a2->is_training());
  EXPECT_FALSE(copy->a2->bias.requires_grad());
  EXPECT_TRUE(copy->a2->weight.requires_grad());
}

TEST(CloneTest, SharedModulesStaySharedInTheClone) {
  Sequential seq;
  auto shared = seq.push_back(Affine(2));
  seq.push_back(shared);
  auto copy = std::dynamic_pointer_cast<Sequential>(seq.clone());
  EXPECT_EQ((*copy)[0].get(), (*copy)[1].get());
  EXPECT_NE((*copy)[0].get(), shared.get());
}

TEST(CloneTest, EntriesRegisteredAfterConstructionAreRejected) {
  Block block;
  block.register_module("extra", Affine(1));
  EXPECT_EQ(error_of([&] { block.clone(); }),
            "clone: rebuilding Block registered the submodules [a1, a2] but the module has [a1, a2, extra]; a module "
            "whose entries change after construction needs a public reset() that registers them (see Note [Module "
            "cloning])");
}

namespace {
struct Noisy : Cloneable<Noisy> {
  Tensor w = register_parameter("w", randn({8}));
};
}  // namespace

TEST(CloneTest, CloneCopiesValuesAndDoesNotConsumeRandomNumbers) {
  manual_seed(123);
  Noisy noisy;
  const uint64_t offset = default_generator().offset();
  Tensor next = randn({4});
  default_generator().set_state(123, offset);
  auto copy = std::dynamic_pointer_cast<Noisy>(noisy.clone());
  EXPECT_EQ(default_generator().offset(), offset);
  EXPECT_EQ(to_vector<float>(copy->w), to_vector<float>(noisy.w));
  EXPECT_EQ(to_vector<float>(randn({4})), to_vector<float>(next));
}

namespace {
struct Plain : Module {};
struct Wider : Affine {
  Wider() : Affine(4) {}
};
struct NeedsArgs : Cloneable<NeedsArgs> {
  explicit NeedsArgs(int64_t n) : inner(register_module("inner", Affine(n))) {}
  std::shared_ptr<Affine> inner;
};
}  // namespace

TEST(CloneTest, ModulesThatCannotBeRebuiltFailClearly) {
  EXPECT_EQ(error_of([] { Plain().clone(); }),
            "clone: Plain cannot be cloned: it does not derive from nn::Cloneable (see Note [Module cloning])");
  EXPECT_EQ(error_of([] { Wider().clone(); }),
            "clone: Wider cannot be cloned: it derives from Cloneable of another class; derive from "
            "Cloneable<itself> (see Note [Module cloning])");
  EXPECT_EQ(error_of([] { NeedsArgs(2).clone(); }),
            "clone: NeedsArgs cannot be cloned: it has neither a public reset() nor a default constructor (see Note "
            "[Module cloning])");
}

TEST(CloneTest, ModuleListAndSequentialCloneTheirChildren) {
  ModuleList list(Affine(1), Affine(2));
  auto copy = std::dynamic_pointer_cast<ModuleList>(list.clone());
  ASSERT_EQ(copy->size(), 2u);
  EXPECT_NE((*copy)[1].get(), list[1].get());
  EXPECT_EQ(copy->at<Affine>(1)->n_, 2);
  fill(copy->at<Affine>(1)->weight, 3.0f);
  EXPECT_EQ(to_vector<float>(list.at<Affine>(1)->weight), (std::vector<float>{1, 1}));
}
