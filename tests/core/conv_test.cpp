// conv2d and conv2d_backward: golden values from PyTorch 1.13 (tests/core/goldens/conv_pool.py),
// a naive reference over many geometries (incl. the chunked and 1x1 GEMM paths), errors.
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
using qflow::testing_util::sin_seq_f32;

namespace {

using qflow::testing_util::error_of;

struct ConvCase {
  IntList x, w;
  bool bias;
  IntList stride, padding, dilation;
  int64_t groups;
  IntList out_shape;
  std::vector<double> expected;  // PyTorch, in float64 from the float32-rounded inputs
};

Tensor run_case(const ConvCase& c, DType dtype) {
  Tensor x = sin_seq_f32(c.x, 0.1, 1.0, dtype);
  Tensor w = sin_seq_f32(c.w, 0.7, 0.5, dtype);
  std::optional<Tensor> b;
  if (c.bias) b = sin_seq_f32({c.w[0]}, 1.3, 0.5, dtype);
  return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
}

void check_case(const ConvCase& c) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor y = run_case(c, dt);
    EXPECT_EQ(y.sizes(), c.out_shape);
    EXPECT_EQ(y.dtype(), dt);
    expect_close(y, c.expected, dt == DType::Float32 ? 1e-5 : 1e-8, dt == DType::Float32 ? 1e-5 : 1e-8);
  }
}

// Direct definition of the convolution and its adjoints, in float64.
struct NaiveConv {
  std::vector<double> y, gx, gw, gb;
};

NaiveConv naive_conv(const Tensor& xt, const Tensor& wt, const Tensor& gyt, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh, int64_t dw, int64_t groups) {
  const auto x = to_vector<double>(xt), w = to_vector<double>(wt), gy = to_vector<double>(gyt);
  const int64_t N = xt.sizes()[0], C = xt.sizes()[1], H = xt.sizes()[2], W = xt.sizes()[3];
  const int64_t O = wt.sizes()[0], Cg = wt.sizes()[1], KH = wt.sizes()[2], KW = wt.sizes()[3];
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  const int64_t Og = O / groups;
  NaiveConv r{std::vector<double>(N * O * OH * OW, 0.0), std::vector<double>(x.size(), 0.0),
              std::vector<double>(w.size(), 0.0), std::vector<double>(O, 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t yi = ((n * O + o) * OH + oh) * OW + ow;
          r.gb[o] += gy[yi];
          for (int64_t cg = 0; cg < Cg; ++cg)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t c = (o / Og) * Cg + cg;
                const int64_t xi = ((n * C + c) * H + ih) * W + iw, wi = ((o * Cg + cg) * KH + i) * KW + j;
                r.y[yi] += x[xi] * w[wi];
                r.gx[xi] += w[wi] * gy[yi];
                r.gw[wi] += x[xi] * gy[yi];
              }
        }
  return r;
}

// Forward and all three gradients against the naive reference.
void check_against_naive(const IntList& xs, const IntList& ws, IntList stride, IntList padding, IntList dilation,
                         int64_t groups, DType dtype = DType::Float64) {
  SCOPED_TRACE(fmt::format("x {} w {} stride {} padding {} dilation {} groups {} {}", xs, ws, stride, padding, dilation,
                           groups, dtype));
  const double tol = dtype == DType::Float64 ? 1e-9 : 2e-4;
  Tensor x = sin_seq_f32(xs, 0.3, 1.0, dtype), w = sin_seq_f32(ws, 0.8, 0.5, dtype);
  Tensor y = conv2d(x, w, std::nullopt, stride, padding, dilation, groups);
  Tensor gy = sin_seq_f32(y.sizes(), 2.1, 1.0, dtype);
  const int64_t sh = stride[0], sw = stride.size() > 1 ? stride[1] : stride[0];
  const int64_t ph = padding[0], pw = padding.size() > 1 ? padding[1] : padding[0];
  const int64_t dh = dilation[0], dw = dilation.size() > 1 ? dilation[1] : dilation[0];
  const NaiveConv ref = naive_conv(x, w, gy, sh, sw, ph, pw, dh, dw, groups);
  expect_close(y, ref.y, tol, tol);
  auto [gx, gw, gb] = conv2d_backward(gy, x, w, stride, padding, dilation, groups);
  expect_close(gx, ref.gx, tol, tol);
  expect_close(gw, ref.gw, tol, tol);
  expect_close(gb, ref.gb, tol, tol);
}

}  // namespace

// ---- golden values from PyTorch --------------------------------------------------------------------

TEST(Conv2dTest, BasicWithBiasMatchesPyTorch) {
  check_case({{2, 3, 5, 5}, {4, 3, 3, 3}, true, {1}, {0}, {1}, 1, {2, 4, 3, 3},
              {5.32558968, 6.06131593, 6.04187806, 1.97400588, -0.103839165, -2.10242352, -5.1845178, -4.77497635, -3.65395775, -3.90422268, -5.5800229, -6.43325326, -3.53596796, -1.18897701, 1.38627632, 7.12249784, 7.50468239, 6.93848335, 3.03646707, 5.13106585, 6.59155811, 5.76609095, 3.88001047, 1.52914796, -5.07688838, -6.13191638, -6.29665911, 0.360590082, -1.50126009, -3.11471264, -4.61783397, -3.77934932, -2.38413838, 3.03683508, 4.43652889, 5.28096842, -2.23891839, -3.85235877, -4.87919391, -3.5468342, -1.83307106, 0.193996183, 5.42296967, 6.09181723, 6.00137245, 1.57551313, 4.00798058, 5.96532655, 6.86056305, 5.36477636, 3.21023229, -4.08760307, -5.69562204, -6.46542535, 1.34603331, -1.14881645, -3.42782006, -6.27217998, -5.45965002, -3.84782285, 3.24880545, 5.2958045, 6.68640044, -2.26410566, -0.48292307, 1.40882994, 5.31754496, 5.44101782, 4.87328351, 0.185343818, -1.66389454, -3.2427235}});
}

TEST(Conv2dTest, Stride2Padding1MatchesPyTorch) {
  check_case({{1, 2, 7, 6}, {3, 2, 3, 3}, true, {2}, {1}, {1}, 1, {1, 3, 4, 3},
              {0.194732732, 1.9103766, 3.08299157, 0.0304881454, -1.79298575, -2.35497109, 2.70152785, 2.74625571, 0.987975403, -0.334757764, 0.984224293, 2.35762315, -0.319776855, 1.15355417, 2.77617829, 0.397040917, -1.80146994, -3.06228215, 3.07186249, 3.77578074, 1.92633675, -0.868708647, -0.00278231946, 1.71219549, -0.786942507, 0.23734207, 2.08229331, 0.710355741, -1.55470324, -3.33742869, 3.01363583, 4.27797259, 2.59687365, -1.27829102, -0.986924715, 0.828991191}});
}

TEST(Conv2dTest, Dilation2WithoutBiasMatchesPyTorch) {
  check_case({{1, 2, 7, 7}, {2, 2, 3, 3}, false, {1}, {2}, {2}, 1, {1, 2, 7, 7},
              {0.121071163, 0.109701423, 0.319913218, 0.329503278, 0.294496578, 0.278769531, 0.155903202, -0.107718584, -0.120666857, -0.227195806, -0.299051547, -0.330432062, -0.388141534, -0.326125587, 0.691651241, 0.64068069, 0.711269036, 0.597835138, 0.403486969, 0.459917269, 0.273092153, -0.595108537, -0.68235856, -0.700413331, -0.732185934, -0.664860624, -0.617345843, -0.530114554, 0.322045862, 0.521636607, 0.481802367, 0.649357242, 0.729024652, 0.591658604, 0.629895422, 0.377310711, 0.102214365, 0.171679014, -0.213331029, -0.569467792, -0.457107737, -0.677373109, -0.683012412, -0.495742142, -0.687328213, -0.35533382, 0.0247533801, 0.0252830464, 0.324139091, -0.160822134, -0.200726634, -0.0727007809, -0.0455734959, -0.0122780517, 0.0415207935, -0.000669236582, 0.0633703781, 0.132813589, 0.0941010668, 0.0825961084, 0.0599121764, -0.0924317017, -0.0605051326, 0.698760944, 0.562519304, 0.683827448, 0.474171809, 0.200339144, 0.293783297, 0.0469963656, -0.724039366, -0.731696771, -0.819174992, -0.754177624, -0.587105837, -0.579038955, -0.402272904, 0.534554589, 0.683839786, 0.711540393, 0.810480771, 0.799726355, 0.692541284, 0.638228048, 0.28249171, 0.0588770288, 0.174661794, -0.162426258, -0.477530734, -0.449663951, -0.651773021, -0.536948807, -0.379976071, -0.620128702, -0.334233775, -0.00310182534, 0.0459849144, 0.326136808}});
}

TEST(Conv2dTest, TwoGroupsMatchPyTorch) {
  check_case({{1, 4, 5, 5}, {6, 2, 3, 3}, true, {1}, {1}, {1}, 2, {1, 6, 5, 5},
              {-0.00449429587, 0.739327512, 1.6473682, 2.39765187, 2.13493356, 2.53047569, 3.88844465, 4.13684554, 3.89055035, 2.11411531, 1.70256863, 0.816089396, -0.522722825, -1.72558042, -1.27469658, -2.23979289, -3.10915181, -2.61962549, -1.71033864, -0.182421977, 0.696302819, 1.76718619, 2.64698766, 3.23373831, 2.48274785, -0.647212817, -0.343333522, 0.575848545, 1.48443214, 1.70336011, 2.36865525, 4.04072071, 4.76463666, 4.91102132, 3.0865256, 2.49686097, 2.08284033, 0.478323398, -1.12359242, -1.17841482, -2.47555773, -3.91942311, -3.75896059, -3.0224005, -1.16768774, 0.0698891221, 0.832959808, 1.84072162, 2.66669032, 2.34136388, -1.19664251, -1.37534518, -0.573998754, 0.365394884, 1.03524979, 1.87694557, 3.62848804, 4.72634117, 5.24486538, 3.62831704, 2.94327456, 3.05980666, 1.41472631, -0.361471418, -0.914307511, -2.36148558, -4.17725829, -4.3683752, -3.90789387, -1.98663305, -0.563857436, -0.215671332, 0.778644534, 1.72793367, 1.8739201, -1.48613981, -2.43583533, -2.18908054, -1.60083486, -0.381331396, 0.0564206201, 1.16543452, 2.79241818, 4.08667022, 3.43915724, 3.36013578, 4.57944314, 3.53925119, 2.06524728, 0.634227651, -1.0562967, -2.83736902, -3.89101915, -4.372829, -2.93656592, -1.31154982, -1.83360021, -1.18992322, -0.339986635, 0.568922464, -1.42264072, -2.62080663, -2.73270374, -2.45080204, -1.16512227, -0.653583362, -0.023291317, 1.49261138, 2.83043629, 2.78936867, 2.70316944, 4.22573267, 3.60728411, 2.52454673, 1.01292806, -0.385092531, -1.85459172, -3.02961762, -3.77065883, -2.89641649, -1.44779498, -2.33329878, -2.04936494, -1.46411902, -0.317256164, -1.15864136, -2.43715438, -2.8920023, -2.95600021, -1.78454709, -1.27099889, -1.20786952, -0.0157549152, 1.1779231, 1.7490633, 1.6677815, 3.27995889, 3.17003264, 2.63048839, 1.25037675, 0.341026067, -0.610704033, -1.74222943, -2.63852119, -2.44897077, -1.38001021, -2.5047161, -2.62036619, -2.38193096, -1.15803889}});
}

TEST(Conv2dTest, DepthwiseWithChannelMultiplierMatchesPyTorch) {
  check_case({{2, 3, 5, 5}, {6, 1, 3, 3}, false, {2}, {1}, {1}, 3, {2, 6, 3, 3},
              {-0.0828683087, 0.814237402, 0.89450716, 0.388915161, -0.775944772, -0.925509802, 0.274940565, 1.25893409, 1.00627684, 0.267555655, -0.563206786, -0.823231535, -0.608073112, 0.564574448, 0.960458949, -0.112306379, -1.1000368, -1.01582764, 0.562649774, -0.0699456221, -0.632007157, -1.03098647, -0.0434931931, 0.786674807, 0.22079055, -0.685759314, -0.941199849, -0.701980923, -0.213935984, 0.48299877, 1.19360945, 0.314004145, -0.714541446, -0.373349914, 0.440973511, 0.85439645, -0.867506925, -0.694795809, 0.174427803, 1.47848899, 0.973075507, -0.353016702, -0.633843164, -0.0632249043, 0.618499537, 0.92405854, 0.932711846, 0.0117730205, -1.52863111, -1.20319381, 0.214572619, 0.728918782, 0.320277942, -0.460354868, 0.498632696, -0.182274162, -0.709723867, -0.971008674, -0.110262297, 0.61241584, 0.24756676, -0.672228108, -0.934525164, -0.634464373, -0.0976938967, 0.562803827, 1.19738935, 0.45391923, -0.500739029, -0.395133913, 0.442653499, 0.863064162, -0.807512833, -0.582523886, 0.257927017, 1.495843, 1.12032563, -0.143400174, -0.660771726, -0.0596079379, 0.634629264, 0.863811948, 0.823228762, -0.0692134915, -1.61077861, -1.4214168, -0.028342085, 0.751228085, 0.30402733, -0.490214688, 0.859859315, 1.15988963, 0.2668286, -1.68862347, -1.95034982, -0.470255091, 0.869679731, 0.753885936, -0.166092841, -0.822731573, -1.29482466, -0.445419992, 1.66150781, 2.11359127, 0.639248064, -0.872598964, -0.937114783, -0.00707091276}});
}

TEST(Conv2dTest, PointwiseSingleImageMatchesPyTorch) {  // the direct-GEMM 1x1 path
  check_case({{1, 4, 3, 3}, {5, 4, 1, 1}, true, {1}, {0}, {1}, 1, {1, 5, 3, 3},
              {0.316873096, 0.312939545, 0.331857584, 0.371066889, 0.425260487, 0.487103632, 0.548226149, 0.600355338, 0.636435815, 0.555236853, 0.658544487, 0.740061135, 0.788753946, 0.798032501, 0.766641049, 0.698828256, 0.603772262, 0.494338465, 0.621332967, 0.644000656, 0.639865108, 0.609485915, 0.556974921, 0.48943915, 0.416019244, 0.346652296, 0.290726743, 0.308134534, 0.208937535, 0.126670935, 0.0724690617, 0.0536679908, 0.0728122842, 0.127310869, 0.209787632, 0.309079704, -0.00318201135, -0.0438383998, -0.0546213395, -0.0340712875, 0.0150302575, 0.0860377126, 0.169340562, 0.253664106, 0.327595597}});
}

TEST(Conv2dTest, PointwiseBatchedMatchesPyTorch) {  // 1x1 through the batched-image GEMM
  check_case({{2, 4, 3, 3}, {5, 4, 1, 1}, false, {1}, {0}, {1}, 1, {2, 5, 3, 3},
              {-0.164906002, -0.168839553, -0.149921514, -0.110712209, -0.0565186118, 0.0053245334, 0.0664470501, 0.118576239, 0.154656716, 0.0576951867, 0.161002821, 0.242519469, 0.29121228, 0.300490835, 0.269099383, 0.20128659, 0.106230596, -0.00320320142, 0.17536863, 0.19803632, 0.193900772, 0.163521578, 0.111010585, 0.0434748137, -0.029945092, -0.09931204, -0.155237593, -0.0258932628, -0.125090262, -0.207356862, -0.261558735, -0.280359806, -0.261215513, -0.206716928, -0.124240165, -0.0249480931, -0.180064189, -0.220720577, -0.231503517, -0.210953465, -0.16185192, -0.0908444649, -0.00754161565, 0.0767819279, 0.150713419, -0.148812155, -0.108941816, -0.0543266939, 0.00764127374, 0.0685750424, 0.120227498, 0.155607732, 0.169927183, 0.16124779, 0.244950702, 0.292277667, 0.300046229, 0.267204931, 0.198198711, 0.102367213, -0.00731919672, -0.116014993, -0.209008692, 0.193232301, 0.161944386, 0.108738041, 0.0408145274, -0.0326330501, -0.101663897, -0.156935016, -0.190965712, -0.199150095, -0.209909318, -0.262910135, -0.280327311, -0.259803486, -0.204116492, -0.120803275, -0.0211399142, 0.0813846418, 0.172894157, -0.231297916, -0.20962134, -0.159573483, -0.0879281173, -0.0043820863, 0.0797570415, 0.15310143, 0.205724253, 0.230503263}});
}

TEST(Conv2dTest, PointwiseStride2DownsampleMatchesPyTorch) {
  check_case({{2, 3, 5, 5}, {2, 3, 1, 1}, false, {2}, {0}, {1}, 1, {2, 2, 3, 3},
              {-0.0575077524, 0.20263439, 0.356786024, -0.143821873, -0.334624341, -0.350397257, 0.301458421, 0.364955428, 0.237557801, 0.0102631154, 0.239961898, 0.344145536, -0.191304007, -0.334689331, -0.303011117, 0.314226749, 0.327738168, 0.169821909, 0.231762223, -0.0216123049, -0.263682231, -0.0450911453, 0.212982433, 0.359652801, -0.155278618, -0.339648506, -0.346360869, 0.163652308, -0.083776534, -0.287384971, 0.0219977805, 0.248256977, 0.34466215, -0.200964941, -0.337316963, -0.297230997}});
}

TEST(Conv2dTest, RectangularKernelWithPerDimHyperParametersMatchesPyTorch) {
  check_case({{1, 3, 6, 7}, {2, 3, 2, 3}, true, {2, 1}, {1, 0}, {1, 2}, 1, {1, 2, 4, 3},
              {2.26843166, 2.80770021, 3.03216619, -1.22554669, -0.340878011, 0.655133408, -2.1864024, -2.21026707, -1.86977589, 1.24002275, 0.994181492, 0.678988904, 2.11364833, 2.77068119, 3.12005523, -1.557708, -1.00014798, -0.239882706, -1.46187996, -1.8040753, -1.83475757, 2.02541071, 1.92882, 1.63851242}});
}

TEST(Conv2dTest, BackwardMatchesPyTorchOnMidSizeGroupedConv) {
  // x (4, 8, 12, 12), w (16, 4, 3, 3), stride 2, padding 1, groups 2; gy = sin_seq_f32(y shape, 1.7).
  Tensor x = sin_seq_f32({4, 8, 12, 12}, 0.2, 1.0, DType::Float64), w = sin_seq_f32({16, 4, 3, 3}, 0.5, 0.3, DType::Float64);
  Tensor gy = sin_seq_f32({4, 16, 6, 6}, 1.7, 1.0, DType::Float64);
  auto [gx, gw, gb] = conv2d_backward(gy, x, w, {2}, {1}, {1}, 2);
  double gx_sum = 0, gx_sq = 0, gw_sum = 0, gw_sq = 0;
  for (double v : to_vector<double>(gx)) gx_sum += v, gx_sq += v * v;
  for (double v : to_vector<double>(gw)) gw_sum += v, gw_sq += v * v;
  EXPECT_NEAR(gx_sum, 53.2964721017, 1e-8);
  EXPECT_NEAR(gx_sq, 7576.68433454, 1e-6);
  EXPECT_NEAR(gw_sum, -3.98914776984, 1e-8);
  EXPECT_NEAR(gw_sq, 397910.31134, 1e-4);
  expect_close(gb, {6.11681109, 6.43830247, 3.27293897, -1.66498128, -5.70118192, -6.64973754, -3.99693014, 0.82053374,
                    5.19361291, 6.75393692, 4.65646502, 0.0371463019, -4.60229042, -6.74921976, -5.24090798, -0.894226835},
               1e-8);
  expect_close(gw.select(0, 0).select(0, 0),
               {3.81688196, -2.34047371, -15.0132794, 29.6818362, 36.6912416, 39.7361824, -26.7681972, -24.5943264, -11.6382244},
               1e-8);
  expect_close(gx.select(0, 1).select(0, 3).narrow(0, 0, 3).narrow(1, 0, 3),
               {-0.208190497, -0.693035098, -0.609848796, 1.49259506, 2.5997011, 1.49249521, -0.789944512, -1.05666315, -0.425176671},
               1e-8);
}

// ---- against the naive definition ------------------------------------------------------------------

TEST(Conv2dTest, ForwardAndBackwardMatchNaiveDefinitionAcrossGeometries) {
  check_against_naive({2, 3, 6, 5}, {4, 3, 3, 3}, {1}, {0}, {1}, 1);
  check_against_naive({2, 3, 7, 8}, {2, 3, 3, 2}, {2, 3}, {1, 2}, {2, 1}, 1);
  check_against_naive({1, 6, 6, 6}, {6, 2, 3, 3}, {1}, {1}, {1}, 3);
  check_against_naive({3, 4, 5, 5}, {4, 1, 3, 3}, {1}, {1}, {1}, 4);     // depthwise
  check_against_naive({2, 4, 5, 5}, {8, 1, 5, 5}, {2}, {2}, {1}, 4);     // depthwise, multiplier 2
  check_against_naive({1, 3, 7, 6}, {3, 1, 3, 2}, {1, 2}, {2, 1}, {2, 1}, 3);  // depthwise, dilated
  check_against_naive({33, 2, 5, 5}, {2, 1, 3, 3}, {1}, {1}, {1}, 2, DType::Float32);
  check_against_naive({2, 3, 5, 5}, {4, 3, 1, 1}, {2}, {0}, {1}, 1);     // 1x1 downsample
  check_against_naive({2, 2, 4, 4}, {3, 2, 1, 1}, {1}, {1}, {1}, 1);     // 1x1 with padding
  check_against_naive({1, 2, 3, 3}, {2, 2, 3, 3}, {3}, {4}, {3}, 1);     // windows reading only padding
  check_against_naive({2, 3, 6, 5}, {4, 3, 3, 3}, {1}, {1}, {1}, 1, DType::Float32);
}

TEST(Conv2dTest, ChunkedBatchesMatchNaiveDefinition) {
  // Several GEMM chunks with a remainder: small planes batch many images per GEMM, large
  // ones few (see Note [Convolution as GEMM]).
  check_against_naive({300, 2, 4, 4}, {3, 2, 3, 3}, {1}, {1}, {1}, 1);
  check_against_naive({3, 2, 48, 48}, {2, 2, 3, 3}, {1}, {1}, {1}, 1);
  check_against_naive({37, 4, 6, 6}, {4, 2, 3, 3}, {2}, {1}, {1}, 2);
}

TEST(Conv2dTest, LargeGemmsSplitOverThreadsMatchNaiveDefinition) {
  // GEMMs above OpenBLAS's threading threshold are split into row or column blocks of C
  // (Note [Threads in conv]); these shapes reach both splits in forward and backward.
  check_against_naive({2, 16, 20, 20}, {32, 16, 3, 3}, {1}, {1}, {1}, 1);   // column blocks
  check_against_naive({1, 8, 6, 6}, {128, 8, 3, 3}, {1}, {1}, {1}, 1);      // row blocks
  check_against_naive({1, 32, 64, 64}, {64, 32, 1, 1}, {1}, {0}, {1}, 1);   // 1x1 direct path
  check_against_naive({2, 16, 20, 20}, {32, 8, 3, 3}, {2}, {1}, {1}, 2, DType::Float32);
}

TEST(Conv2dTest, PointwiseLargePlanesUseDirectGemmAndMatchNaiveDefinition) {
  check_against_naive({2, 3, 64, 64}, {4, 3, 1, 1}, {1}, {0}, {1}, 1);
  check_against_naive({2, 4, 64, 64}, {4, 2, 1, 1}, {1}, {0}, {1}, 2);
}

// ---- calling conventions ------------------------------------------------------------------------

TEST(Conv2dTest, UnbatchedInputGivesUnbatchedOutput) {
  Tensor x = sin_seq_f32({3, 5, 5}, 0.1), w = sin_seq_f32({4, 3, 3, 3}, 0.7, 0.5), b = sin_seq_f32({4}, 1.3, 0.5);
  Tensor y = conv2d(x, w, b, {1}, {1});
  EXPECT_EQ(y.sizes(), (IntList{4, 5, 5}));
  EXPECT_EQ(to_vector<float>(y), to_vector<float>(conv2d(x.unsqueeze(0), w, b, {1}, {1})));
  auto [gx, gw, gb] = conv2d_backward(ones({4, 5, 5}), x, w, {1}, {1}, {1}, 1);
  EXPECT_EQ(gx.sizes(), (IntList{3, 5, 5}));
}

TEST(Conv2dTest, CallByNameFillsSchemaDefaults) {
  Tensor x = sin_seq_f32({2, 3, 5, 5}, 0.1), w = sin_seq_f32({4, 3, 3, 3}, 0.7, 0.5);
  Stack r = call_op("conv2d", {x, w});
  EXPECT_EQ(to_vector<float>(r.at(0).tensor()), to_vector<float>(conv2d(x, w)));
  EXPECT_EQ(r.at(0).tensor().sizes(), (IntList{2, 4, 3, 3}));
}

TEST(Conv2dTest, UndefinedBiasMeansNoBias) {
  Tensor x = sin_seq_f32({1, 2, 4, 4}, 0.1), w = sin_seq_f32({3, 2, 3, 3}, 0.7, 0.5);
  EXPECT_EQ(to_vector<float>(conv2d(x, w, Tensor())), to_vector<float>(conv2d(x, w)));
}

TEST(Conv2dTest, NonContiguousInputIsReadCorrectly) {
  Tensor x = sin_seq_f32({2, 3, 6, 5}, 0.1), w = sin_seq_f32({4, 3, 3, 3}, 0.7, 0.5);
  Tensor xt = x.transpose(2, 3);  // (2, 3, 5, 6), strided
  EXPECT_EQ(to_vector<float>(conv2d(xt, w, std::nullopt, {1}, {1})),
            to_vector<float>(conv2d(xt.contiguous(), w, std::nullopt, {1}, {1})));
}

TEST(Conv2dTest, BackwardComputesOnlyRequestedGradients) {
  Tensor x = sin_seq_f32({1, 2, 5, 5}, 0.1, 1.0, DType::Float64), w = sin_seq_f32({3, 2, 3, 3}, 0.7, 0.5, DType::Float64);
  Tensor gy = ones({1, 3, 3, 3}, DType::Float64);
  auto [gx, gw, gb] = conv2d_backward(gy, x, w, {1}, {0}, {1}, 1, false, true, false);
  EXPECT_FALSE(gx.defined());
  EXPECT_TRUE(gw.defined());
  EXPECT_FALSE(gb.defined());
  EXPECT_EQ(to_vector<double>(std::get<1>(conv2d_backward(gy, x, w, {1}, {0}, {1}, 1))), to_vector<double>(gw));
  // grad_bias is the sum of grad_output over batch and positions: 9 ones per channel.
  EXPECT_EQ(to_vector<double>(std::get<2>(conv2d_backward(gy, x, w, {1}, {0}, {1}, 1))), (std::vector<double>{9, 9, 9}));
}

TEST(Conv2dTest, EmptyBatchGivesEmptyOutputAndZeroWeightGrad) {
  Tensor x = zeros({0, 2, 5, 5}), w = sin_seq_f32({3, 2, 3, 3}, 0.7);
  Tensor y = conv2d(x, w);
  EXPECT_EQ(y.sizes(), (IntList{0, 3, 3, 3}));
  auto [gx, gw, gb] = conv2d_backward(y, x, w, {1}, {0}, {1}, 1);
  EXPECT_EQ(gx.sizes(), (IntList{0, 2, 5, 5}));
  EXPECT_EQ(to_vector<float>(gw), std::vector<float>(54, 0.0f));
  EXPECT_EQ(to_vector<float>(gb), std::vector<float>(3, 0.0f));
}

// ---- errors -------------------------------------------------------------------------------------------

TEST(Conv2dTest, WrongInputRankIsRejected) {
  EXPECT_THAT(error_of([] { conv2d(zeros({3, 4}), zeros({2, 3, 1, 1})); }),
              HasSubstr("conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got input of shape [3, 4]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 3, 4, 4}), zeros({2, 3, 1})); }),
              HasSubstr("conv2d: expected a 4-D weight (O, C / groups, kH, kW), got weight of shape [2, 3, 1]"));
}

TEST(Conv2dTest, ChannelMismatchNamesBothShapes) {
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 8, 5, 5}), zeros({4, 16, 3, 3})); }),
              HasSubstr("conv2d: expected input with 16 channels for weight of shape [4, 16, 3, 3] and groups=1, got "
                        "input of shape [1, 8, 5, 5]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 8, 5, 5}), zeros({4, 2, 3, 3}), std::nullopt, {1}, {0}, {1}, 2); }),
              HasSubstr("conv2d: expected input with 4 channels for weight of shape [4, 2, 3, 3] and groups=2, got "
                        "input of shape [1, 8, 5, 5]"));
}

TEST(Conv2dTest, GroupsMustDivideChannels) {
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 4, 5, 5}), zeros({6, 2, 3, 3}), std::nullopt, {1}, {0}, {1}, 3); }),
              HasSubstr("conv2d: groups=3 does not divide the 4 channels of input of shape [1, 4, 5, 5]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 4, 5, 5}), zeros({5, 2, 3, 3}), std::nullopt, {1}, {0}, {1}, 2); }),
              HasSubstr("conv2d: groups=2 does not divide the 5 output channels of weight of shape [5, 2, 3, 3]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 4, 5, 5}), zeros({4, 4, 3, 3}), std::nullopt, {1}, {0}, {1}, 0); }),
              HasSubstr("conv2d: groups must be positive, got 0"));
}

TEST(Conv2dTest, KernelLargerThanPaddedInputIsRejected) {
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 3, 3})); }),
              HasSubstr("conv2d: kernel of size [3, 3] (dilation [1], extent [3, 3]) is larger than the padded input "
                        "of size [2, 2] (input of shape [1, 1, 2, 2], padding [0])"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {1}, {0}, {2}); }),
              HasSubstr("extent [5, 5]) is larger than the padded input of size [4, 4]"));
  EXPECT_EQ(conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 3, 3}), std::nullopt, {1}, {1}).sizes(), (IntList{1, 1, 2, 2}));
}

TEST(Conv2dTest, NonPositiveStrideOrDilationIsRejected) {
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {0}); }),
              HasSubstr("conv2d: stride must be positive, got [0]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {1, -1}); }),
              HasSubstr("conv2d: stride must be positive, got [1, -1]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {1}, {0}, {0}); }),
              HasSubstr("conv2d: dilation must be positive, got [0]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {1}, {-1}); }),
              HasSubstr("conv2d: padding must be non-negative, got [-1]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 3, 3}), std::nullopt, {1, 1, 1}); }),
              HasSubstr("conv2d: expected stride to have 1 or 2 values, got [1, 1, 1]"));
}

TEST(Conv2dTest, BiasAndDtypeMismatchesAreRejected) {
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 2, 4, 4}), zeros({3, 2, 3, 3}), zeros({2})); }),
              HasSubstr("conv2d: expected bias of shape [3] for weight of shape [3, 2, 3, 3], got bias of shape [2]"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 2, 4, 4}), zeros({3, 2, 3, 3}, DType::Float64)); }),
              HasSubstr("conv2d: weight dtype float64 does not match input dtype float32"));
  EXPECT_THAT(error_of([] { conv2d(zeros({1, 2, 4, 4}, DType::Int64), zeros({3, 2, 3, 3}, DType::Int64)); }),
              HasSubstr("conv2d: expected a float32 or float64 input, got int64"));
}

TEST(Conv2dTest, BackwardRejectsGradOutputOfWrongShape) {
  EXPECT_THAT(error_of([] { conv2d_backward(zeros({1, 3, 3, 3}), zeros({1, 2, 4, 4}), zeros({3, 2, 3, 3}), {1}, {0}, {1}, 1); }),
              HasSubstr("conv2d_backward: expected grad_output of shape [1, 3, 2, 2] (the conv2d output for input of "
                        "shape [1, 2, 4, 4] and weight of shape [3, 2, 3, 3]), got [1, 3, 3, 3]"));
}
