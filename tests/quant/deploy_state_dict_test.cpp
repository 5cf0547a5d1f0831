// The deploy state_dict (Note [Deployed module layout]): weights are the integers of their grid
// (int8 where the integer kernels run, uint8 on affine grids, int32 on wider ones) and stand
// for the QAT model's fake-quantized weights bit for bit; saved and loaded back, a deploy model
// computes the same outputs bit for bit; a ResNet18 file is about a quarter of the float one;
// loads are strict about dtypes, shapes and keys; older files with float weights upgrade
// exactly.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "error_of.h"
#include "quant/pass_test_util.h"

using namespace qflow;
using namespace qflow::quant;
using namespace pass_test;
using qflow::testing_util::error_of;
using ::testing::HasSubstr;

namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("qflow_deploy_state_dict_{}_{}.safetensors", ::getpid(), name))
      .string();
}

// The eval-mode deploy model of `model` (weights drawn with `seed`) whose QAT observers saw two
// random batches.
std::shared_ptr<fx::GraphModule> deployed(const std::string& model, const QConfig& qc, uint64_t seed,
                                          const models::ModelOptions& options = {}) {
  const IntList image{options.in_channels, options.image_size, options.image_size};
  manual_seed(seed);
  const Tensor example = randn({1, image[0], image[1], image[2]});
  auto float_gm = traced(model, example, seed, options);
  auto qat = quantization_aware_training(*float_gm, example, qc);
  calibrate(*qat, std::vector<Tensor>{randn({4, image[0], image[1], image[2]}),
                                      randn({4, image[0], image[1], image[2]}) * 2.0});
  auto deploy = dequantization_aware_training(*float_gm, *qat, example, qc);
  deploy->eval();
  return deploy;
}

const models::ModelOptions kLeNet{.in_channels = 1, .image_size = 28};

// Every element of `a` equals `b`'s, as bytes (dtype and shape first).
void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t bytes = static_cast<size_t>(a.numel()) * element_size(a.dtype());
  EXPECT_EQ(std::memcmp(ca.raw_data(), cb.raw_data(), bytes), 0) << what;
}

struct StoredType {
  QConfig qconfig;
  DType type;
};

}  // namespace

TEST(DeployedWeightTest, StoresTheGridIntegersThatMakeTheFakeQuantizedWeight) {
  const StoredType cases[] = {
      {{}, DType::Int8},
      {{.per_layer = false}, DType::Int8},
      {{.formula = Formula::Cambricon}, DType::Int8},
      {{.scheme = Scheme::Affine}, DType::UInt8},
      {{.bits = 4, .scheme = Scheme::Affine, .per_layer = false}, DType::UInt8},
      {{.bits = 12}, DType::Int32},
  };
  for (const auto& [qc, type] : cases) {
    SCOPED_TRACE(qc.to_string());
    QConv2d q({.in = 3, .out = 4, .kernel = 3, .padding = 1}, qc);
    manual_seed(4);
    q(randn({2, 3, 6, 6}));
    q.eval();
    auto d = DConv2d::from_qconv2d(q);
    EXPECT_EQ(d->weight.dtype(), type);
    EXPECT_EQ(d->state_dict().at("weight").dtype(), type);
    EXPECT_FALSE(d->weight.requires_grad());
    // (q - z) * s is the QAT model's weight, bit for bit ...
    const QParams wq = q.weight_observer->calculate_qparams();
    expect_identical(d->float_weight(), fake_quantize(q.weight.detach(), wq, qc), "float_weight");
    // ... so the float simulation computes the Q module's eval output exactly.
    d->set_integer(false);
    const Tensor x = randn({1, 3, 6, 6});
    expect_identical((*d)(x), q(x), "output");
  }
}

TEST(DeployedWeightTest, FloatWeightFollowsTheIntegersWhenTheyAreWritten) {
  QLinear q({.in = 4, .out = 2});
  manual_seed(6);
  q(randn({3, 4}));
  auto d = DLinear::from_qlinear(q);
  const float s = d->weight_scale.item<float>();
  {
    NoGradGuard no_grad;
    d->weight.fill_(3);
  }
  EXPECT_THAT(to_vector<float>(d->float_weight()), ::testing::Each(3.0f * s));
}

TEST(DeployedWeightTest, UnquantizedSourceKeepsAFloatWeight) {
  QConv2d q({.in = 1, .out = 2, .kernel = 1});
  q.enable_fake_quant(false);
  auto d = DConv2d::from_qconv2d(q);
  EXPECT_EQ(d->weight.dtype(), DType::Float32);
  expect_identical(d->weight, q.weight.detach(), "weight");
  EXPECT_TRUE(d->float_weight().is_same(d->weight));
}

// An affine grid whose zero point is 0 (weights that are all >= 0) is still uint8 [0, 255]:
// its integers do not fit the int8 kernels, so the layer says so and stays in float.
TEST(DeployedWeightTest, AffineWeightsWithoutZeroPointStayInFloatAndSayWhy) {
  const QConfig qc{.scheme = Scheme::Affine};
  QConv2d q({.in = 2, .out = 3, .kernel = 1}, qc);
  {
    NoGradGuard no_grad;
    q.weight.copy_(q.weight.abs());
  }
  manual_seed(8);
  q(randn({2, 2, 4, 4}));
  q.eval();
  auto d = DConv2d::from_qconv2d(q);
  EXPECT_EQ(to_vector<float>(d->weight_zero_point), (std::vector<float>{0.0f}));
  const std::vector<uint8_t> integers = to_vector<uint8_t>(d->weight);
  EXPECT_GT(*std::max_element(integers.begin(), integers.end()), 127);  // beyond int8
  EXPECT_EQ(d->integer_unsupported(), "the weights are uint8, not int8");
  const Tensor x = randn({1, 2, 4, 4});
  expect_identical((*d)(x), q(x), "output");
}

TEST(DeployStateDictTest, SavedAndLoadedTheModelComputesTheSameBits) {
  for (const QConfig& qc : {QConfig{}, QConfig{.scheme = Scheme::Affine, .per_layer = false}}) {
    SCOPED_TRACE(qc.to_string());
    auto source = deployed("resnet18", qc, 1);
    const std::string file = temp_file("round_trip");
    nn::save(source->state_dict(), file);
    auto target = deployed("resnet18", qc, 2);  // other weights, other scales
    target->load_state_dict(nn::load(file));
    std::filesystem::remove(file);
    const nn::StateDict want = source->state_dict(), got = target->state_dict();
    ASSERT_EQ(got.keys(), want.keys());
    for (const auto& [key, value] : want) expect_identical(got.at(key), value, key);
    NoGradGuard no_grad;
    manual_seed(3);
    const Tensor x = randn({2, 3, 32, 32});
    expect_identical((*target)(x), (*source)(x), "integer model output");
    set_integer(*source, false);
    set_integer(*target, false);
    expect_identical((*target)(x), (*source)(x), "float simulation output");
  }
}

TEST(DeployStateDictTest, ResNet18FileIsAQuarterOfTheFloatOne) {
  manual_seed(0);
  auto float_model = models::create("resnet18");
  const std::string float_file = temp_file("float"), deploy_file = temp_file("deploy");
  nn::save(float_model->state_dict(), float_file);
  auto deploy = deployed("resnet18", {}, 0);
  nn::save(deploy->state_dict(), deploy_file);
  const auto float_bytes = std::filesystem::file_size(float_file);
  const auto deploy_bytes = std::filesystem::file_size(deploy_file);
  std::filesystem::remove(float_file);
  std::filesystem::remove(deploy_file);
  const double ratio = static_cast<double>(deploy_bytes) / static_cast<double>(float_bytes);
  std::cout << fmt::format("ResNet18 safetensors: float {} bytes, int8 deploy {} bytes ({:.3f}x)\n", float_bytes,
                           deploy_bytes, ratio);
  ::testing::Test::RecordProperty("float_bytes", std::to_string(float_bytes));
  ::testing::Test::RecordProperty("deploy_bytes", std::to_string(deploy_bytes));
  EXPECT_LT(ratio, 0.3);
}

TEST(DeployStateDictTest, LoadIsStrictAboutDtypesShapesAndKeys) {
  auto deploy = deployed("lenet5", {}, 1, kLeNet);
  const auto conv1 = deploy->get_submodule<DConv2d>("conv1");
  const std::vector<int8_t> before = to_vector<int8_t>(conv1->weight);
  const std::string shape = fmt::format("{}", conv1->weight.sizes());
  const nn::StateDict good = deployed("lenet5", {}, 2, kLeNet)->state_dict();

  // A deploy file from before weights were integers: float values on the grid are refused
  // rather than truncated into int8.
  nn::StateDict old_float = good;
  old_float.insert_or_assign("conv1.weight", quant::detail::dequantize_weight(good.at("conv1.weight"), good.at("conv1.weight_scale"),
                                                               good.at("conv1.weight_zero_point")));
  EXPECT_THAT(error_of([&] { deploy->load_state_dict(old_float); }),
              HasSubstr(fmt::format("dtype mismatch for conv1.weight: copying a float32 tensor of shape {} from the "
                                    "state_dict into the module's int8 tensor of shape {} would change its values",
                                    shape, shape)));
  // An affine model's uint8 integers are not this symmetric model's int8 ones.
  const nn::StateDict affine = deployed("lenet5", {.scheme = Scheme::Affine}, 2, kLeNet)->state_dict();
  EXPECT_THAT(error_of([&] { deploy->load_state_dict(affine); }),
              HasSubstr(fmt::format("dtype mismatch for conv1.weight: copying a uint8 tensor of shape {}", shape)));
  // Per-channel scales do not fit per-layer ones; a missing weight is named.
  const nn::StateDict per_channel = deployed("lenet5", {.per_layer = false}, 2, kLeNet)->state_dict();
  EXPECT_THAT(error_of([&] { deploy->load_state_dict(per_channel); }),
              HasSubstr("size mismatch for conv1.weight_scale: copying a tensor of shape [6] from the state_dict, the "
                        "shape in the module is [1]"));
  nn::StateDict missing = good;
  missing.erase("conv1.weight");
  EXPECT_THAT(error_of([&] { deploy->load_state_dict(missing); }), HasSubstr("Missing key(s): \"conv1.weight\""));
  // Nothing was copied by the refused loads; the right file loads.
  EXPECT_EQ(to_vector<int8_t>(conv1->weight), before);
  deploy->load_state_dict(good);
  EXPECT_EQ(to_vector<int8_t>(conv1->weight), to_vector<int8_t>(good.at("conv1.weight")));
}

namespace {

// `dict` as a deploy state_dict of an older qflow wrote it: every weight as its float value.
nn::StateDict as_older_float_file(const nn::StateDict& dict) {
  nn::StateDict old = dict;
  for (const auto& [key, value] : dict) {
    if (!key.ends_with(".weight")) continue;
    const std::string layer = key.substr(0, key.size() - 6);
    old.insert_or_assign(key, quant::detail::dequantize_weight(value, dict.at(layer + "weight_scale"),
                                                               dict.at(layer + "weight_zero_point")));
  }
  return old;
}

}  // namespace

TEST(DeployStateDictTest, OlderFloatFilesUpgradeExactlyToTheIntegers) {
  for (const QConfig& qc : {QConfig{}, QConfig{.scheme = Scheme::Affine, .per_layer = false}}) {
    SCOPED_TRACE(qc.to_string());
    const nn::StateDict current = deployed("lenet5", qc, 3, kLeNet)->state_dict();
    nn::StateDict older = as_older_float_file(current);
    EXPECT_TRUE(older.at("fc1.weight").is_floating_point());
    EXPECT_EQ(upgrade_deploy_state_dict(older, qc), 5u);  // 2 convolutions, 3 linear layers
    for (const auto& [key, value] : current) expect_identical(older.at(key), value, key);
    // An up-to-date state_dict passes through unchanged.
    nn::StateDict again = current;
    EXPECT_EQ(upgrade_deploy_state_dict(again, qc), 0u);
  }
}

TEST(DeployStateDictTest, UpgradeRefusesAWeightOffItsGrid) {
  const nn::StateDict current = deployed("lenet5", {}, 3, kLeNet)->state_dict();
  nn::StateDict older = as_older_float_file(current);
  older.insert_or_assign("fc2.weight", older.at("fc2.weight") + older.at("fc2.weight_scale") * 0.25);
  EXPECT_THAT(error_of([&] { upgrade_deploy_state_dict(older, {}); }),
              HasSubstr("upgrade_deploy_state_dict: fc2.weight element 0 ("));
}
