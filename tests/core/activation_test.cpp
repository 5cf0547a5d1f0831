// Activations (relu6, hardswish, hardtanh, leaky_relu), softmax / log_softmax and dropout:
// golden values from PyTorch 1.13 (tests/core/goldens/nn_ops.py), stability on large
// logits, dropout statistics and seeding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "qflow/qflow.h"
#include "error_of.h"
#include "test_helpers.h"

using namespace qflow;
using ::testing::HasSubstr;
using qflow::testing_util::expect_close;
using qflow::testing_util::sin_seq;

namespace {

using qflow::testing_util::error_of;

}  // namespace

// ---- activations ----------------------------------------------------------------------------------

TEST(ActivationTest, Relu6HardswishHardtanhLeakyReluMatchPyTorch) {
  Tensor x = sin_seq({12}, 0.3, 5.0);
  expect_close(relu6(x), {1.47760105, 3.10492992, 4.31202126, 4.93550062, 4.8909831, 4.18449402, 2.91165328, 1.24473393, 0,
                          0, 0, 0});
  expect_close(hardswish(x), {1.10268462, 3.10492992, 4.31202126, 4.93550062, 4.8909831, 4.18449402, 2.86878085,
                              0.880594015, -0.237181708, -0.255685776, -0, -0});
  expect_close(hardtanh(x, -2.0, 1.5), {1.47760105, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.24473393, -0.590654254, -2, -2, -2});
  expect_close(leaky_relu(x, 0.2), {1.47760105, 3.10492992, 4.31202126, 4.93550062, 4.8909831, 4.18449402, 2.91165328,
                                    1.24473393, -0.118130855, -0.469220012, -0.756802499, -0.941955268});
}

// Note [One declaration per op]'s example of a new op: silu, declared in core/ops/activation.toml.
// Goldens: torch.nn.functional.silu (PyTorch 1.13) on the same float32 inputs, and its autograd
// gradient in float64 at points that exercise both branches of the stable sigmoid.
TEST(ActivationTest, SiluAndItsBackwardMatchPyTorch) {
  Tensor x = sin_seq({12}, 0.3, 5.0);
  expect_close(silu(x), {1.20307744, 2.97171474, 4.25497723, 4.90028286, 4.85450649, 4.12172031, 2.76146865,
                         0.966395199, -0.210559234, -0.204993442, -0.0841037259, -0.0420413166});
  Tensor xd = from_vector<double>({-30, -4, -1, 0, 1, 4, 30});
  expect_close(silu(xd), {-2.8072868906517896e-12, -0.07194483984836623, -0.2689414213699951, 0.0, 0.7310585786300049,
                          3.928055160151634, 29.999999999997197},
               1e-15, 1e-15);
  expect_close(silu_backward(ones({7}, DType::Float64), xd),
               {-2.713710660963134e-12, -0.05266461489107291, 0.07232948812851325, 0.5, 0.9276705118714869,
                1.0526646148910728, 1.000000000002711},
               1e-15, 1e-15);
  EXPECT_THAT(error_of([] { silu(ones({2}, DType::Int64)); }), HasSubstr("silu: expected a floating point tensor, got int64"));
}

// Issue 35's closing example of a new op: hardsigmoid, one table in core/ops/activation.toml (its
// derivative, CUDA kernel and ONNX converter declared there too) plus its kernels. Goldens:
// torch.nn.functional.hardsigmoid (PyTorch 1.13) on the same float32 inputs (the same arithmetic,
// so equal), and its autograd gradient in float64 on both sides of the kinks at -3 and 3.
TEST(ActivationTest, HardsigmoidAndItsBackwardMatchPyTorch) {
  Tensor x = sin_seq({12}, 0.3, 5.0);
  expect_close(hardsigmoid(x), {0.746266842, 1, 1, 1, 1, 1, 0.985275567, 0.707455635, 0.401557595, 0.108983316, 0, 0});
  Tensor xd = from_vector<double>({-4, -3, -2.5, -1, 0, 1, 2.5, 3, 4});
  expect_close(hardsigmoid(xd), {0, 0, 1.0 / 12, 1.0 / 3, 0.5, 2.0 / 3, 11.0 / 12, 1, 1}, 1e-15, 1e-15);
  // The gradient passes only strictly inside (-3, 3). PyTorch multiplies by float32's 1/6
  // (0.16666667163...) even in float64; qflow divides by 6, exact to float64.
  expect_close(hardsigmoid_backward(ones({9}, DType::Float64), xd), {0, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0, 0},
               1e-15, 1e-15);
  expect_close(hardsigmoid_backward(full({9}, 3.0, DType::Float64), xd), {0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0}, 1e-15,
               1e-15);
  // hardswish is x times it.
  expect_close(hardswish(x), to_vector<double>(mul(x, hardsigmoid(x)).to(DType::Float64)), 1e-6, 1e-6);
  EXPECT_THAT(error_of([] { hardsigmoid(ones({2}, DType::Int64)); }),
              HasSubstr("hardsigmoid: expected a floating point tensor, got int64"));
  EXPECT_THAT(error_of([] { hardsigmoid_backward(ones({3}), ones({2})); }),
              HasSubstr("hardsigmoid_backward: grad_output has shape [3], expected self's shape [2]"));
}

TEST(ActivationTest, Relu6ClampsAtZeroAndSixOnStridedInput) {
  Tensor x = from_vector<double>({-1, 0, 3, 6, 7, 2.5}, {2, 3}).t();  // a transposed view
  EXPECT_EQ(to_vector<double>(relu6(x)), (std::vector<double>{0, 6, 0, 6, 3, 2.5}));
}

TEST(ActivationTest, BackwardOpsFollowPyTorchBranches) {
  Tensor x = from_vector<double>({-4, -3, -1, 0, 3, 4, 6});
  Tensor g = ones({7}, DType::Float64);
  // hardswish': 0 below -3, x/3 + 1/2 on [-3, 3], 1 above.
  expect_close(hardswish_backward(g, x), {0, -0.5, 1.0 / 6.0, 0.5, 1.5, 1, 1}, 1e-15, 1e-15);
  // relu6 = hardtanh(0, 6): the gradient passes only strictly inside.
  EXPECT_EQ(to_vector<double>(hardtanh_backward(g, x, 0, 6)), (std::vector<double>{0, 0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(to_vector<double>(leaky_relu_backward(g, x, 0.1)), (std::vector<double>{0.1, 0.1, 0.1, 0.1, 1, 1, 1}));
}

TEST(ActivationTest, IntegerInputIsRefused) {
  EXPECT_THAT(error_of([] { relu6(ones({2}, DType::Int64)); }), HasSubstr("relu6: expected a floating point tensor, got int64"));
  EXPECT_THAT(error_of([] { hardtanh(ones({2}), 1.0, -1.0); }), HasSubstr("hardtanh: min_val (1) cannot be greater than max_val (-1)"));
}

// ---- softmax ------------------------------------------------------------------------------------

TEST(SoftmaxTest, EveryDimMatchesPyTorch) {
  Tensor x = sin_seq({2, 3, 4}, 0.1, 3.0);
  expect_close(softmax(x, 0), {0.962853491, 0.986616731, 0.991536498, 0.989869237, 0.977694154, 0.921798944, 0.694202363,
                               0.281238645, 0.0711277574, 0.0207774136, 0.00980683509, 0.00855918787, 0.0371464342,
                               0.0133833019, 0.00846350286, 0.0101307752, 0.0223059058, 0.078201063, 0.305797637,
                               0.718761384, 0.928872228, 0.979222536, 0.990193188, 0.991440773});
  expect_close(log_softmax(x, 0), {-0.0378539935, -0.0134736467, -0.00849951897, -0.010182457, -0.0225583855, -0.0814281702,
                                   -0.364991784, -1.26855171, -2.64327765, -3.87388873, -4.62467575, -4.76074982,
                                   -3.29288745, -4.31374741, -4.77199221, -4.59217739, -3.80290389, -2.54847193,
                                   -1.18483174, -0.330225855, -0.0737840757, -0.0209963266, -0.00985518564, -0.00859608408});
  expect_close(softmax(x, 1), {0.0594114549, 0.189366788, 0.504913926, 0.814146638, 0.884356081, 0.789899707, 0.486459136,
                               0.182087913, 0.056232404, 0.0207334794, 0.00862689968, 0.00376541773, 0.00302855158,
                               0.00245404802, 0.00395522639, 0.00915788207, 0.0266594905, 0.0640195906, 0.196655884,
                               0.511467874, 0.970311999, 0.933526337, 0.799388885, 0.47937426});
  expect_close(log_softmax(x, 1), {-2.82326818, -1.66406941, -0.683367312, -0.205614775, -0.122895524, -0.235849261,
                                   -0.720602334, -1.70326567, -2.87826204, -3.87600565, -4.75287008, -5.58189631,
                                   -5.7996707, -6.01001644, -5.5327177, -4.69314051, -3.62460995, -2.74856615,
                                   -1.62629986, -0.670470536, -0.0301376395, -0.0687860921, -0.223907724, -0.735273659});
  const std::vector<double> sm2 = {0.0433343649, 0.124973871, 0.299877822, 0.531813979, 0.409759015, 0.331151277,
                                   0.183532298,  0.0755574629, 0.658545434, 0.219697148, 0.0822656378, 0.0394918062,
                                   0.147043198,  0.149104074, 0.225134164, 0.478718609, 0.0300220363, 0.090218924,
                                   0.259630263,  0.62012881,  0.270145178, 0.325243711, 0.260917991, 0.143693075};
  expect_close(softmax(x, 2), sm2);
  expect_close(softmax(x, -1), sm2);
  expect_close(log_softmax(x, -1), {-3.13880944, -2.07965064, -1.20438027, -0.631461561, -0.892186046, -1.10517991,
                                    -1.69536459, -2.5828619, -0.417721808, -1.51550531, -2.49780178, -3.23166203,
                                    -1.9170289, -1.90311074, -1.49105883, -0.736642361, -3.50582361, -2.40551615,
                                    -1.34849668, -0.477828085, -1.30879581, -1.12318051, -1.34354913, -1.94007576});
}

TEST(SoftmaxTest, LargeLogitsStayFiniteAndExact) {
  Tensor x = sin_seq({3, 5}, 0.7, 3.0);
  {
    std::vector<float> v = to_vector<float>(x);
    for (int i = 0; i < 5; ++i) v[i] += 1e4f, v[5 + i] -= 1e4f;
    const float spread[] = {1e4f, -1e4f, 0.0f, 5e3f, -5e3f};
    for (int i = 0; i < 5; ++i) v[10 + i] = spread[i];
    x = from_vector<float>(v, {3, 5});
  }
  expect_close(softmax(x, 1), {0.0979203519854, 0.197033381452, 0.277590387502, 0.261537136912, 0.165918742148,
                               0.647613999704, 0.235008800974, 0.0780292613533, 0.0274980516177, 0.0118498863509, 1, 0,
                               0, 0, 0});
  expect_close(log_softmax(x, 1), {-2.3236008656, -1.6243821156, -1.2816086781, -1.3411789906, -1.7962571156,
                                   -0.434460439586, -1.44813231459, -2.55067137709, -3.59364012709, -4.43543700209, 0,
                                   -20000, -10000, -5000, -15000});
  // Also along dim 0, where the lanes path (inner > 1) runs.
  for (double v : to_vector<double>(log_softmax(x.t().contiguous(), 0))) EXPECT_TRUE(std::isfinite(v));
}

TEST(SoftmaxTest, ParallelPathsAgreeWithTransposedLayout) {
  // 300 x 700: rows above the parallel grain, and the lane-block path (dim 0, inner 700 > 256).
  Tensor x = sin_seq({300, 700}, 0.4, 6.0, DType::Float64);
  Tensor by_rows = softmax(x.t().contiguous(), 1);
  Tensor by_lanes = softmax(x, 0);
  expect_close(by_lanes.t().contiguous(), to_vector<double>(by_rows), 1e-12, 1e-15);
  Tensor l_rows = log_softmax(x.t().contiguous(), 1), l_lanes = log_softmax(x, 0);
  expect_close(l_lanes.t().contiguous(), to_vector<double>(l_rows), 1e-12, 1e-12);
  for (double s : to_vector<double>(sum(by_lanes, {0}))) EXPECT_NEAR(s, 1.0, 1e-12);
}

TEST(SoftmaxTest, BadDimIsRefused) {
  EXPECT_THAT(error_of([] { softmax(ones({2, 3}), 2); }), HasSubstr("softmax: dimension 2 out of range"));
}

// ---- dropout ------------------------------------------------------------------------------------

TEST(DropoutTest, ZeroesAboutPAndScalesTheRest) {
  manual_seed(123);
  Tensor x = full({200000}, 2.0);
  auto [y, mask] = native_dropout(x, 0.3, true);
  const std::vector<float> v = to_vector<float>(y);
  const std::vector<bool> m = to_vector<bool>(mask);
  int64_t zeros_n = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (m[i]) EXPECT_FLOAT_EQ(v[i], 2.0f / 0.7f);
    else EXPECT_EQ(v[i], 0.0f);
    zeros_n += !m[i];
  }
  // Binomial(200000, 0.3): standard deviation ~205, so 5 sigma is ~0.005 of the count.
  EXPECT_NEAR(static_cast<double>(zeros_n) / 200000.0, 0.3, 0.005);
  EXPECT_NEAR(mean(y).item<double>(), 2.0, 0.02);  // the scaling keeps the expectation
}

TEST(DropoutTest, IdentityInEvalOrWithPZeroAndZerosWithPOne) {
  Tensor x = sin_seq({4, 5}, 0.1);
  EXPECT_TRUE(dropout(x, 0.5, /*train=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  for (float v : to_vector<float>(dropout(x, 1.0, true))) EXPECT_EQ(v, 0.0f);
}

TEST(DropoutTest, DeterministicUnderManualSeed) {
  Tensor x = sin_seq({1000}, 0.2);
  manual_seed(7);
  const std::vector<float> a = to_vector<float>(dropout(x, 0.5, true));
  const std::vector<float> b = to_vector<float>(dropout(x, 0.5, true));  // the generator moved on
  manual_seed(7);
  const std::vector<float> c = to_vector<float>(dropout(x, 0.5, true));
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
}

TEST(DropoutTest, BackwardUsesTheMask) {
  Tensor g = full({3, 2}, 1.5);
  Tensor mask = from_vector<bool>({true, false, true, true, false, false}, {3, 2});
  EXPECT_EQ(to_vector<float>(native_dropout_backward(g, mask, 2.0)), (std::vector<float>{3, 0, 3, 3, 0, 0}));
}

TEST(DropoutTest, BadProbabilityIsRefused) {
  EXPECT_EQ(error_of([] { dropout(ones({2}), 1.5, true); }), "dropout: probability has to be between 0 and 1, but got 1.5");
}
