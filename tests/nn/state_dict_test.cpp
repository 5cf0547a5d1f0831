// state_dict / load_state_dict, StateDict itself, and the containers.
#include "test_modules.h"

using namespace qflow;
using namespace qflow::nn;
using namespace qflow::nn::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(StateDictTest, KeepsInsertionOrderAndRejectsDuplicates) {
  StateDict d{{"b", ones({1})}, {"a", zeros({2})}};
  d.insert("c", ones({3}));
  EXPECT_THAT(d.keys(), ElementsAre("b", "a", "c"));
  EXPECT_EQ(d.at("a").numel(), 2);
  EXPECT_EQ(d.find("zz"), nullptr);
  EXPECT_EQ(error_of([&] { d.insert("a", ones({1})); }), "StateDict: duplicate key 'a'");
  EXPECT_EQ(error_of([&] { d.at("zz"); }), "StateDict: no key 'zz' (3 keys)");
  EXPECT_TRUE(d.erase("b"));
  EXPECT_FALSE(d.erase("b"));
  d.insert_or_assign("a", ones({5}));
  EXPECT_THAT(d.keys(), ElementsAre("a", "c"));
  EXPECT_EQ(d.at("a").numel(), 5);
  EXPECT_EQ(d.at("c").numel(), 3);
}

TEST(StateDictTest, StateDictHasParametersAndBuffersSharingStorage) {
  Net net;
  StateDict sd = net.state_dict();
  EXPECT_THAT(sd.keys(), ElementsAre("scale", "stem.weight", "stem.bias", "stem.calls", "layer1.0.a1.weight",
                                     "layer1.0.a1.bias", "layer1.0.a1.calls", "layer1.0.a2.weight", "layer1.0.a2.bias",
                                     "layer1.0.a2.calls", "layer1.1.a1.weight", "layer1.1.a1.bias", "layer1.1.a1.calls",
                                     "layer1.1.a2.weight", "layer1.1.a2.bias", "layer1.1.a2.calls"));
  EXPECT_FALSE(sd.at("stem.weight").requires_grad());  // detached, like PyTorch
  fill(net.stem->weight, 4.0f);
  EXPECT_EQ(to_vector<float>(sd.at("stem.weight")), (std::vector<float>{4, 4, 4}));  // same storage
}

TEST(StateDictTest, RoundTripCopiesIntoExistingTensors) {
  Net source;
  fill(source.stem->weight, 3.0f);
  fill(source.layer1->at<Block>(1)->a1->bias, -1.5f);
  {
    NoGradGuard no_grad;
    source.stem->calls.fill_(9);
  }
  Net target;
  Tensor held = target.stem->weight;
  LoadStateDictResult r = target.load_state_dict(source.state_dict());
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  EXPECT_TRUE(held.is_same(target.stem->weight));
  EXPECT_EQ(to_vector<float>(held), (std::vector<float>{3, 3, 3}));
  EXPECT_TRUE(held.requires_grad());
  EXPECT_EQ(to_vector<float>(target.layer1->at<Block>(1)->a1->bias), (std::vector<float>{-1.5f, -1.5f, -1.5f}));
  EXPECT_EQ(to_vector<int64_t>(target.stem->calls), (std::vector<int64_t>{9}));
  for (const auto& [key, value] : source.state_dict()) {
    EXPECT_EQ(to_vector<double>(value), to_vector<double>(target.state_dict().at(key))) << key;
  }
}

TEST(StateDictTest, StrictLoadReportsMissingUnexpectedAndMismatchedTogether) {
  Net net;
  StateDict sd = net.state_dict();
  sd.erase("scale");
  sd.erase("stem.calls");
  sd.insert("head.weight", ones({2}));
  sd.insert_or_assign("stem.weight", ones({4}));
  sd.insert_or_assign("stem.bias", full({3}, 8.0f));
  EXPECT_EQ(error_of([&] { net.load_state_dict(sd); }),
            "load_state_dict: error(s) in loading state_dict for Net:\n"
            "  Missing key(s): \"scale\", \"stem.calls\"\n"
            "  Unexpected key(s): \"head.weight\"\n"
            "  size mismatch for stem.weight: copying a tensor of shape [4] from the state_dict, the shape in the "
            "module is [3]");
  // Nothing was copied: a failed load leaves the module as it was.
  EXPECT_EQ(to_vector<float>(net.stem->bias), (std::vector<float>{0, 0, 0}));
}

TEST(StateDictTest, NonStrictLoadReturnsTheKeyListsButStillRejectsShapes) {
  Net net;
  StateDict sd;
  sd.insert("stem.bias", full({3}, 2.0f));
  sd.insert("extra", ones({1}));
  LoadStateDictResult r = net.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra"}));
  EXPECT_EQ(r.missing_keys.size(), 15u);
  EXPECT_EQ(r.missing_keys.front(), "scale");
  EXPECT_EQ(to_vector<float>(net.stem->bias), (std::vector<float>{2, 2, 2}));

  sd.insert_or_assign("stem.bias", ones({2, 3}));
  EXPECT_EQ(error_of([&] { net.load_state_dict(sd, false); }),
            "load_state_dict: error(s) in loading state_dict for Net:\n"
            "  size mismatch for stem.bias: copying a tensor of shape [2, 3] from the state_dict, the shape in the "
            "module is [3]");
}

TEST(StateDictTest, LoadConvertsDtypesLikeCopy) {
  Affine m(2);
  m.load_state_dict({{"weight", from_vector<double>({0.25, 0.5})},
                     {"bias", from_vector<int64_t>({1, 2})},
                     {"calls", from_vector<int64_t>({4})}});
  EXPECT_EQ(m.weight.dtype(), DType::Float32);
  EXPECT_EQ(to_vector<float>(m.weight), (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(to_vector<float>(m.bias), (std::vector<float>{1, 2}));
}

TEST(StateDictTest, LoadRefusesConversionsThatChangeValues) {
  // See Note [load_state_dict converts dtypes]: integers widen, floats never become integers.
  Affine m(2);
  m.load_state_dict({{"weight", ones({2})}, {"bias", zeros({2})}, {"calls", from_vector<int32_t>({7})}});
  EXPECT_EQ(to_vector<int64_t>(m.calls), (std::vector<int64_t>{7}));
  EXPECT_EQ(error_of([&] {
              m.load_state_dict({{"weight", ones({2})}, {"bias", zeros({2})}, {"calls", from_vector<float>({4.5f})}});
            }),
            "load_state_dict: error(s) in loading state_dict for Affine:\n"
            "  dtype mismatch for calls: copying a float32 tensor of shape [1] from the state_dict into the module's "
            "int64 tensor of shape [1] would change its values");
  EXPECT_EQ(to_vector<int64_t>(m.calls), (std::vector<int64_t>{7}));  // nothing copied
}

TEST(ContainerTest, SequentialChainsChildrenAndIndexes) {
  Sequential seq(Affine(2), std::make_shared<Affine>(2));
  fill(seq.at<Affine>(0)->weight, 3.0f);
  fill(seq.at<Affine>(-1)->bias, 1.0f);
  EXPECT_EQ(to_vector<float>(seq(from_vector<float>({1, 2}))), (std::vector<float>{4, 7}));
  EXPECT_EQ(to_vector<float>(seq.forward(from_vector<float>({0, 1}))), (std::vector<float>{1, 4}));
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[-2].get(), seq[0].get());
  EXPECT_EQ(error_of([&] { seq[2]; }), "Sequential: index 2 is out of range for 2 modules");
  EXPECT_THAT(error_of([&] { seq.at<Block>(0); }), HasSubstr("Sequential::at(0): the module is a Affine"));
  Tensor x = from_vector<float>({5});
  EXPECT_TRUE(Sequential()(x).is_same(x));  // empty = identity
  std::vector<std::string> names;
  for (const auto& [name, m] : seq.named_children()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("0", "1"));
}

TEST(ContainerTest, ModuleListHoldsAndIterates) {
  ModuleList list;
  list.push_back(Affine(1));
  list.push_back(std::make_shared<Block>());
  int count = 0;
  for (const ModulePtr& m : list) count += static_cast<int>(m->parameters().size());
  EXPECT_EQ(count, 6);
  EXPECT_EQ(list.state_dict().keys().front(), "0.weight");
  EXPECT_EQ(list.get_submodule("1.a2").get(), list.at<Block>(1)->a2.get());
  EXPECT_EQ(list.repr(), "ModuleList(\n  (0): Affine(1)\n  (1): Block(\n    (a1): Affine(3)\n    (a2): Affine(3)\n  )\n)");
  EXPECT_THAT(error_of([&] { list(ones({1})); }), HasSubstr("ModuleList: forward(const Tensor&) is not implemented"));
}
