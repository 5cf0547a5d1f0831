// max_pool2d, avg_pool2d, adaptive_avg_pool2d and their backward ops: golden values from
// PyTorch 1.13 (tests/core/goldens/conv_pool.py), hand-computed cases, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "qflow/qflow.h"
#include "error_of.h"
#include "test_helpers.h"

using namespace qflow;
using ::testing::HasSubstr;
using qflow::testing_util::expect_close;
using qflow::testing_util::sin_seq_f32;

namespace {

using qflow::testing_util::error_of;

}  // namespace

// ---- max_pool2d -----------------------------------------------------------------------------------

TEST(MaxPool2dTest, Kernel3Stride2Padding1MatchesPyTorch) {
  Tensor x = sin_seq_f32({1, 2, 7, 7}, 0.3);
  auto [y, idx] = max_pool2d_with_indices(x, {3}, {2}, {1});
  const std::vector<double> expected = {0.620985985, 0.987100124, 0.987100124, 0.836898804, 0.976758599, 0.833149314, 0.865833938, 0.98816824, 0.976758599, 0.989190459, 0.975275278, 0.571196854, 0.869223356, 0.989190459, 0.975275278, 0.571196854, 0.825534463, 0.636879623, 0.990166783, 0.990166783, 0.991097093, 0.991097093, 0.821669459, 0.642118633, 0.991097093, 0.991097093, 0.991981387, 0.970553756, 0.554297924, 0.87914902, 0.991981387, 0.970553756};
  expect_close(y, {1, 2, 4, 4}, expected);
  expect_close(max_pool2d(x, {3}, {2}, {1}), {1, 2, 4, 4}, expected);
  EXPECT_EQ(idx.dtype(), DType::Int64);
  EXPECT_EQ(to_vector<int64_t>(idx), (std::vector<int64_t>{1, 3, 3, 5, 21, 22, 19, 20, 21, 37, 38, 40, 36, 37, 38, 40, 7, 3, 5, 5, 22, 22, 24, 20, 22, 22, 39, 40, 42, 38, 39, 40}));
}

TEST(MaxPool2dTest, EmptyStrideDefaultsToKernelSize) {
  Tensor x = sin_seq_f32({1, 2, 7, 7}, 0.3);
  expect_close(max_pool2d(x, {2}), {1, 2, 3, 3},
               {0.620985985, 0.987100124, 0.978196621, 0.976758599, 0.57677716, 0.865833938, 0.869223356, 0.989190459, 0.829361141, 0.825534463, 0.636879623, 0.990166783, 0.991097093, 0.972172797, 0.559956968, 0.327894002, 0.87914902, 0.991981387});
  Stack by_name = call_op("max_pool2d", {x, IntList{2}});
  EXPECT_EQ(to_vector<float>(by_name.at(0).tensor()), to_vector<float>(max_pool2d(x, {2}, {2})));
}

TEST(MaxPool2dTest, CeilModeAddsPartialWindowMatchingPyTorch) {
  Tensor x = sin_seq_f32({1, 1, 6, 6}, 0.4);
  EXPECT_EQ(max_pool2d(x, {3}, {2}).sizes(), (IntList{1, 1, 2, 2}));
  expect_close(max_pool2d(x, {3}, {2}, {0}, {1}, true), {1, 1, 3, 3},
               {0.908633471, 0.998152494, 0.95257622, 0.998543322, 0.998543322, 0.773774326, 0.144272715, 0.401935279, 0.705854952});
}

TEST(MaxPool2dTest, DilationMatchesPyTorch) {
  expect_close(max_pool2d(sin_seq_f32({1, 2, 7, 7}, 0.3), {2}, {1}, {0}, {2}), {1, 2, 5, 5},
               {0.862404227, 0.987100124, 0.978196621, 0.987100124, 0.98816824, 0.976758599, 0.833149314, 0.57677716, 0.242340907, -0.124895036, -0.0631432757, 0.302023619, 0.626313031, 0.865833938, 0.98816824, 0.989190459, 0.975275278, 0.989190459, 0.975275278, 0.829361141, -0.131653413, -0.481211931, -0.413569063, -0.0563407652, 0.308513016, 0.314988077, 0.636879623, 0.872572482, 0.990166783, 0.973746657, 0.972172797, 0.991097093, 0.972172797, 0.821669459, 0.559956968, -0.493114471, -0.401121855, -0.0427282155, 0.321448505, 0.642118633, 0.972172797, 0.991097093, 0.991981387, 0.970553756, 0.991981387, 0.554297924, 0.215807945, -0.151890621, -0.499031514, -0.394870162});
}

TEST(MaxPool2dTest, NaNWinsItsWindow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>({1, nan, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2}).item<float>()));
}

TEST(MaxPool2dTest, BackwardRoutesGradientToArgmaxLikePyTorch) {
  Tensor x = sin_seq_f32({1, 1, 6, 7}, 0.2, 1.0, DType::Float64);
  auto [y, idx] = max_pool2d_with_indices(x, {3}, {2}, {1});
  Tensor gx = max_pool2d_with_indices_backward(sin_seq_f32(y.sizes(), 1.1, 1.0, DType::Float64), x, {3}, {2}, {1}, {1}, false, idx);
  expect_close(gx, {1, 1, 6, 7},
               {0, 0.891207337, 0, 0.994924366, 0.963982999, 0.802571058, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.177462429, -0.521328807, -0.262100875, 0.190422654, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1.9565571, 0, -0.897110522, 0});
}

TEST(MaxPool2dTest, UnbatchedInputKeepsThreeDims) {
  Tensor x = sin_seq_f32({2, 7, 7}, 0.3);
  Tensor y = max_pool2d(x, {3}, {2}, {1});
  EXPECT_EQ(y.sizes(), (IntList{2, 4, 4}));
  EXPECT_EQ(to_vector<float>(y), to_vector<float>(max_pool2d(x.unsqueeze(0), {3}, {2}, {1})));
}

TEST(MaxPool2dTest, BadArgumentsAreRejected) {
  EXPECT_THAT(error_of([] { max_pool2d(zeros({4, 4}), {2}); }),
              HasSubstr("max_pool2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got input of shape [4, 4]"));
  EXPECT_THAT(error_of([] { max_pool2d(zeros({1, 1, 4, 4}), {3}, {1}, {2}); }),
              HasSubstr("max_pool2d: padding [2] must be non-negative and at most half of kernel_size [3, 3]"));
  EXPECT_THAT(error_of([] { max_pool2d(zeros({1, 1, 4, 4}), {2}, {0}); }),
              HasSubstr("max_pool2d: stride must be positive, got [0]"));
  EXPECT_THAT(error_of([] { max_pool2d(zeros({1, 1, 4, 4}), {0}); }),
              HasSubstr("max_pool2d: kernel_size must be positive, got [0]"));
  EXPECT_THAT(error_of([] { max_pool2d(zeros({1, 1, 2, 2}), {3}); }),
              HasSubstr("max_pool2d: input of shape [1, 1, 2, 2] is too small for kernel_size [3, 3] (dilation [1, 1], "
                        "padding [0, 0]): the output would be [0, 0]"));
  EXPECT_THAT(error_of([] { max_pool2d(zeros({1, 1, 4, 4}, DType::Int64), {2}); }),
              HasSubstr("max_pool2d: expected a float32 or float64 input, got int64"));
}

TEST(MaxPool2dTest, BackwardRejectsIndicesOutsideThePlane) {
  Tensor x = zeros({1, 1, 4, 4});
  Tensor idx = from_vector<int64_t>({0, 1, 2, 16}, {1, 1, 2, 2});
  EXPECT_THAT(error_of([&] { max_pool2d_with_indices_backward(ones({1, 1, 2, 2}), x, {2}, {2}, {0}, {1}, false, idx); }),
              HasSubstr("max_pool2d_with_indices_backward: an index lies outside its input plane of 4 x 4"));
}

// ---- avg_pool2d -----------------------------------------------------------------------------------

TEST(AvgPool2dTest, HandComputedTwoByTwo) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  EXPECT_EQ(to_vector<float>(avg_pool2d(x, {2})), (std::vector<float>{3.5f, 5.5f, 11.5f, 13.5f}));
}

TEST(AvgPool2dTest, CountIncludePadMatchesPyTorch) {
  Tensor x = sin_seq_f32({1, 2, 7, 7}, 0.3);
  expect_close(avg_pool2d(x, {3}, {2}, {1}), {1, 2, 4, 4},
               {0.116369128, 0.125148565, 0.0115354257, -0.0558197759, 0.0890431255, 0.0141367037, -0.140220806, -0.144896835, 0.151901498, 0.205821961, 0.0925910473, -0.0197081584, 0.0986632258, 0.0711547807, -0.0540428571, -0.0910828486, 0.103803784, 0.173179135, 0.122670241, 0.0272538997, 0.149486303, 0.157887965, 0.00956613477, -0.075306192, 0.0990558043, 0.212858066, 0.203978032, 0.0855975077, 0.118009008, 0.157695174, 0.0679084361, -0.018069353});
  expect_close(avg_pool2d(x, {3}, {2}, {1}, false, false), {1, 2, 4, 4},
               {0.261830539, 0.187722847, 0.017303139, -0.125594497, 0.133564696, 0.0141367037, -0.140220806, -0.217345253, 0.22785224, 0.205821961, 0.0925910473, -0.0295622367, 0.221992254, 0.106732167, -0.0810642838, -0.204936415, 0.233558506, 0.259768695, 0.184005365, 0.0613212734, 0.224229455, 0.157887965, 0.00956613477, -0.112959288, 0.14858371, 0.212858066, 0.203978032, 0.128396258, 0.265520275, 0.236542761, 0.101862662, -0.0406560451});
}

TEST(AvgPool2dTest, CeilModeWindowsClipToPaddedInputLikePyTorch) {
  Tensor x = sin_seq_f32({1, 1, 6, 6}, 0.4);
  expect_close(avg_pool2d(x, {3}, {2}, {1}, true), {1, 1, 4, 4},
               {0.192758635, 0.220246881, 0.0427466966, -0.0321156867, 0.0434610769, 0.0430390984, -0.0024497211, -0.0137899565, 0.00183663098, 0.0373179987, 0.0647186562, 0.0345363468, -0.252814949, -0.153071553, 0.191900969, 0.176463738});
  expect_close(avg_pool2d(x, {3}, {2}, {1}, true, false), {1, 1, 4, 4},
               {0.433706939, 0.330370337, 0.0641200468, -0.0963470638, 0.0651916191, 0.0430390984, -0.0024497211, -0.0275799129, 0.00275494647, 0.0373179987, 0.0647186562, 0.0690726936, -0.758444846, -0.306143105, 0.383801937, 0.705854952});
}

TEST(AvgPool2dTest, DivisorOverrideReplacesWindowSize) {
  expect_close(avg_pool2d(sin_seq_f32({1, 2, 7, 7}, 0.3), {2}, {}, {0}, false, true, 3), {1, 2, 3, 3},
               {0.349107385, 0.20782727, -0.0421595573, 0.223524094, 0.35266614, 0.297341615, -0.147598147, 0.110104837, 0.310216069, 0.311411351, 0.347519249, 0.201852754, -0.0152492523, 0.229164973, 0.353711456, -0.325158626, -0.140924707, 0.11702168});
  EXPECT_THAT(error_of([] { avg_pool2d(zeros({1, 1, 4, 4}), {2}, {}, {0}, false, true, 0); }),
              HasSubstr("avg_pool2d: divisor_override must not be zero"));
}

TEST(AvgPool2dTest, BackwardMatchesPyTorch) {
  Tensor x = sin_seq_f32({1, 1, 6, 7}, 0.2, 1.0, DType::Float64);
  Tensor y = avg_pool2d(x, {3}, {2}, {1}, true, false);
  Tensor gx = avg_pool2d_backward(sin_seq_f32(y.sizes(), 1.1, 1.0, DType::Float64), x, {3}, {2}, {1}, true, false);
  expect_close(gx, {1, 1, 6, 7},
               {0.222801834, 0.388622562, 0.165820728, 0.326484561, 0.160663833, 0.361306598, 0.200642765, 0.311557651, 0.498536451, 0.1869788, 0.327924586, 0.140945786, 0.254700416, 0.11375463, 0.0887558162, 0.109913889, 0.0211580727, 0.00144002504, -0.0197180476, -0.106606182, -0.0868881345, -0.0436834792, -0.129235682, -0.0855522023, -0.215955208, -0.130403005, -0.36680956, -0.236406555, -0.132439295, -0.23914957, -0.106710275, -0.217395233, -0.110684958, -0.260203378, -0.14951842, -0.470757673, -0.698995729, -0.228238056, -0.339984781, -0.111746725, -0.0819432155, 0.0298035095});
}

TEST(AvgPool2dTest, BackwardRejectsGradOutputOfWrongShape) {
  EXPECT_THAT(error_of([] { avg_pool2d_backward(zeros({1, 1, 3, 3}), zeros({1, 1, 4, 4}), {2}, {2}, {0}, false, true); }),
              HasSubstr("avg_pool2d_backward: expected grad_output of shape [1, 1, 2, 2] for input of shape [1, 1, 4, 4], "
                        "got [1, 1, 3, 3]"));
}

// ---- adaptive_avg_pool2d --------------------------------------------------------------------------

TEST(AdaptiveAvgPool2dTest, OverlappingWindowsMatchPyTorch) {
  expect_close(adaptive_avg_pool2d(sin_seq_f32({2, 2, 5, 7}, 0.6), {3, 4}), {2, 2, 3, 4},
               {0.233708531, 0.126165643, -0.0601428151, -0.18983753, 0.0720978677, -0.0525245927, -0.185536012, -0.230284765, -0.110418648, -0.215984568, -0.257130235, -0.203957513, 0.167882621, 0.0318933539, -0.150457516, -0.246666342, -0.0150714563, -0.130164772, -0.218947992, -0.216907576, -0.193655357, -0.254479647, -0.223951206, -0.124253199, 0.0776507109, -0.0670154616, -0.218899384, -0.267635912, -0.100049794, -0.188882172, -0.220530286, -0.171997309, -0.248739377, -0.255979687, -0.15821512, -0.0264855027, -0.0238696784, -0.156181902, -0.255518705, -0.249697834, -0.170483336, -0.22014077, -0.190052941, -0.102082908, -0.267662793, -0.220266536, -0.0694785044, 0.0751325041});
}

TEST(AdaptiveAvgPool2dTest, OutputLargerThanInputRepeatsPixelsLikePyTorch) {
  expect_close(adaptive_avg_pool2d(sin_seq_f32({1, 1, 2, 3}, 0.6), {3, 4}), {1, 1, 3, 4},
               {0.564642489, 0.694764137, 0.899185121, 0.973484516, 0.777484655, 0.813247025, 0.827316999, 0.805624604, 0.990326822, 0.931729913, 0.755448818, 0.637764692});
}

TEST(AdaptiveAvgPool2dTest, GlobalPoolingIsThePlaneMean) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2});
  Tensor y = adaptive_avg_pool2d(x, {1});
  EXPECT_EQ(y.sizes(), (IntList{1, 2, 1, 1}));
  EXPECT_EQ(to_vector<float>(y), (std::vector<float>{2.5f, 25.0f}));
}

TEST(AdaptiveAvgPool2dTest, BackwardMatchesPyTorch) {
  Tensor x = sin_seq_f32({1, 1, 6, 7}, 0.2, 1.0, DType::Float64);
  Tensor gx = adaptive_avg_pool2d_backward(sin_seq_f32({1, 1, 3, 4}, 1.1, 1.0, DType::Float64), x);
  expect_close(gx, {1, 1, 6, 7},
               {0.222801834, 0.388622562, 0.165820728, 0.326484561, 0.160663833, 0.361306598, 0.200642765, 0.222801834, 0.388622562, 0.165820728, 0.326484561, 0.160663833, 0.361306598, 0.200642765, 0.133133724, 0.164870833, 0.031737109, 0.00216003756, -0.0295770715, -0.159909273, -0.130332202, 0.133133724, 0.164870833, 0.031737109, 0.00216003756, -0.0295770715, -0.159909273, -0.130332202, -0.198658943, -0.358724356, -0.160065413, -0.326092849, -0.166027437, -0.390305067, -0.22427763, -0.198658943, -0.358724356, -0.160065413, -0.326092849, -0.166027437, -0.390305067, -0.22427763});
}

TEST(AdaptiveAvgPool2dTest, BadArgumentsAreRejected) {
  EXPECT_THAT(error_of([] { adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {2, 2, 2}); }),
              HasSubstr("adaptive_avg_pool2d: expected output_size to have 1 or 2 values, got [2, 2, 2]"));
  EXPECT_THAT(error_of([] { adaptive_avg_pool2d(zeros({1, 0, 4, 4}), {2}); }),
              HasSubstr("adaptive_avg_pool2d: expected non-empty channel and spatial dims, got input of shape [1, 0, 4, 4]"));
  EXPECT_THAT(error_of([] { adaptive_avg_pool2d_backward(zeros({1, 2, 1, 1}), zeros({1, 1, 4, 4})); }),
              HasSubstr("adaptive_avg_pool2d_backward: grad_output of shape [1, 2, 1, 1] (float32) does not fit input "
                        "of shape [1, 1, 4, 4] (float32)"));
}
