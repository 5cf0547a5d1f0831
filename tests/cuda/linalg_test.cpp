// mm, bmm, matmul and addmm on the GPU (cuBLAS, Note [cuBLAS matrix products] in
// cuda/kernels/linalg_ops.cpp) against the CPU kernels on the same random inputs: odd and
// degenerate sizes, transposed and strided views, broadcast batches, addmm's broadcast self and
// beta/alpha, float64, autograd of a linear layer, errors, and TF32.
//
// Reference and tolerances. The CPU reference runs in float64 on the float32 inputs, so an error
// is the GPU's alone; relative_error is max |got - want| / max |want|. In strict float32 an
// output sums k products of randn values in float32: cuBLAS's blocked accumulation errs by
// ~sqrt(k) eps |term| against outputs of ~sqrt(k) |term| — about 1e-6 for the k <= 1000 here —
// and kStrictTol = 2e-5 bounds it with margin while any wrong operand layout (O(1) errors) fails.
// The k = 1000003 products sum a million terms: float32 summation error grows with the length
// of the running sums (a random walk of ~sqrt(k) eps relative to the partial sums, which are as
// large as the result), ~1e-4 at worst for cuBLAS's split accumulation; kLongSumTol = 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "error_of.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::gpu;
using qflow::testing_util::error_of;
using qflow::testing_util::relative_error;

namespace {

constexpr double kStrictTol = 2e-5;
constexpr double kLongSumTol = 1e-3;
// TF32 rounds each factor to 10 explicit mantissa bits (2^-11 ≈ 4.9e-4 relative), ~1e-3 per
// product at worst; independent errors over k products partly cancel and accumulation stays
// float32, so the error normalised by the largest output is ~4e-4 for randn data and below
// ~1e-3; 2e-3 accepts TF32 and fails any real error.
constexpr double kTf32Tol = 2e-3;
constexpr double kFloat64Tol = 1e-12;

Tensor f64(const Tensor& t) { return t.to(DType::Float64); }

Tensor rnd(const IntList& sizes, uint64_t seed, DType dtype = DType::Float32) {
  Generator gen(seed);
  return randn(sizes, dtype, &gen);
}

struct Tf32Guard {
  explicit Tf32Guard(bool allow) { set_allow_tf32(allow); }
  ~Tf32Guard() { set_allow_tf32(false); }
};

}  // namespace

TEST(CudaLinalgTest, MmOddSizes) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> shapes = {{1, 1, 1},   {7, 5, 3},    {1, 7, 1},     {13, 1, 9},
                                                    {64, 64, 64}, {129, 257, 33}, {1000, 3, 7}, {5, 999, 1}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(fmt::format("({} x {}) @ ({} x {})", s[0], s[1], s[1], s[2]));
    const Tensor a = rnd({s[0], s[1]}, 1), b = rnd({s[1], s[2]}, 2);
    const Tensor got = mm(a.to(gpu()), b.to(gpu()));
    EXPECT_EQ(got.device(), gpu());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_LE(relative_error(got.cpu(), mm(f64(a), f64(b))), kStrictTol);
  }
}

TEST(CudaLinalgTest, MmLongReduction) {
  QFLOW_REQUIRE_CUDA();
  const Tensor a = rnd({1, 1000003}, 3), b = rnd({1000003, 1}, 4);
  EXPECT_LE(relative_error(mm(a.to(gpu()), b.to(gpu())).cpu(), mm(f64(a), f64(b))), kLongSumTol);
  const Tensor c = rnd({3, 1000003}, 5), d = rnd({1000003, 2}, 6);
  EXPECT_LE(relative_error(mm(c.to(gpu()), d.to(gpu())).cpu(), mm(f64(c), f64(d))), kLongSumTol);
}

TEST(CudaLinalgTest, MmTransposedAndStridedViews) {
  QFLOW_REQUIRE_CUDA();
  const Tensor a = rnd({9, 7}, 7), b = rnd({11, 9}, 8);  // used as a.t() (7 x 9), b.t() (9 x 11)
  const Tensor ag = a.to(gpu()), bg = b.to(gpu());
  const Tensor want = mm(f64(a).t(), f64(b).t());
  EXPECT_LE(relative_error(mm(ag.t(), bg.t()).cpu(), want), kStrictTol) << "both transposed";
  EXPECT_LE(relative_error(mm(ag.t(), bg.t().contiguous()).cpu(), want), kStrictTol) << "left transposed";
  EXPECT_LE(relative_error(mm(ag.t().contiguous(), bg.t()).cpu(), want), kStrictTol) << "right transposed";
  // A column slice: row stride 12 > 5 columns (a leading dimension).
  const Tensor wide = rnd({6, 12}, 9), r = rnd({5, 4}, 10);
  EXPECT_LE(relative_error(mm(wide.to(gpu()).narrow(1, 3, 5), r.to(gpu())).cpu(), mm(f64(wide).narrow(1, 3, 5), f64(r))),
            kStrictTol)
      << "column slice";
  // Every other row and column: no BLAS layout, copied first (left and right operand).
  const Tensor big = rnd({12, 16}, 11), r8 = rnd({8, 4}, 12), tall = rnd({16, 4}, 13);
  const Tensor left = big.to(gpu()).slice(0, 0, 12, 2).slice(1, 0, 16, 2);  // (6, 8), strides (32, 2)
  const Tensor left_ref = f64(big).slice(0, 0, 12, 2).slice(1, 0, 16, 2);
  EXPECT_LE(relative_error(mm(left, r8.to(gpu())).cpu(), mm(left_ref, f64(r8))), kStrictTol) << "strided left";
  EXPECT_LE(relative_error(mm(left, tall.to(gpu()).slice(0, 0, 16, 2)).cpu(), mm(left_ref, f64(tall).slice(0, 0, 16, 2))),
            kStrictTol)
      << "strided both";
}

TEST(CudaLinalgTest, MmEmptyAndZeroDepth) {
  QFLOW_REQUIRE_CUDA();
  const Tensor e = mm(zeros({0, 3}, DType::Float32, gpu()), zeros({3, 4}, DType::Float32, gpu()));
  EXPECT_EQ(e.sizes(), (std::vector<int64_t>{0, 4}));
  const Tensor z = mm(zeros({3, 0}, DType::Float32, gpu()), zeros({0, 4}, DType::Float32, gpu()));
  EXPECT_EQ(z.sizes(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(to_vector<float>(z.cpu()), std::vector<float>(12, 0.0f));
}

TEST(CudaLinalgTest, BmmMatchesCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = rnd({5, 7, 3}, 12), y = rnd({5, 3, 9}, 13);
  const Tensor want = bmm(f64(x), f64(y));
  EXPECT_LE(relative_error(bmm(x.to(gpu()), y.to(gpu())).cpu(), want), kStrictTol);
  // Transposed matrices within the batch, and a permuted batch dim.
  const Tensor xt = rnd({5, 3, 7}, 14), yt = rnd({9, 5, 3}, 15);  // as (5, 7, 3) and (5, 3, 9)
  const Tensor want_t = bmm(f64(xt).transpose(1, 2), f64(yt).permute({1, 2, 0}));
  EXPECT_LE(relative_error(bmm(xt.to(gpu()).transpose(1, 2), yt.to(gpu()).permute({1, 2, 0})).cpu(), want_t),
            kStrictTol);
  // A batch of one, and an operand broadcast along the batch (stride 0).
  EXPECT_LE(relative_error(bmm(x.to(gpu()).narrow(0, 2, 1), y.to(gpu()).narrow(0, 2, 1)).cpu(),
                           bmm(f64(x).narrow(0, 2, 1), f64(y).narrow(0, 2, 1))),
            kStrictTol);
  const Tensor shared = rnd({1, 3, 9}, 16);
  EXPECT_LE(relative_error(bmm(x.to(gpu()), shared.to(gpu()).expand({5, 3, 9})).cpu(),
                           bmm(f64(x), f64(shared).expand({5, 3, 9}))),
            kStrictTol);
}

TEST(CudaLinalgTest, MatmulRankCases) {
  QFLOW_REQUIRE_CUDA();
  struct Case {
    IntList a, b;
  };
  const std::vector<Case> cases = {
      {{7}, {7}},                     // dot
      {{7}, {7, 4}},                  // vector @ matrix
      {{5, 7}, {7}},                  // matrix @ vector
      {{3, 5, 7}, {7}},               // batch @ vector
      {{7}, {3, 7, 4}},               // vector @ batch
      {{2, 3, 5, 7}, {7, 4}},         // a shared right operand: one tall GEMM
      {{5, 7}, {3, 7, 4}},            // a shared left operand
      {{2, 1, 5, 7}, {1, 3, 7, 4}},   // broadcast both ways: looped outer dim
      {{4, 1, 5, 7}, {3, 7, 6}},      // broadcast of a missing dim
      {{1, 1, 1}, {1, 1, 1}},         // all ones
  };
  uint64_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} @ {}", c.a, c.b));
    const Tensor a = rnd(c.a, seed++), b = rnd(c.b, seed++);
    const Tensor want = matmul(f64(a), f64(b));
    const Tensor got = matmul(a.to(gpu()), b.to(gpu()));
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_LE(relative_error(got.cpu(), want), kStrictTol);
  }
}

TEST(CudaLinalgTest, MatmulOfViews) {
  QFLOW_REQUIRE_CUDA();
  // A linear layer's weight.t() on a 3-D input, and a transposed batch.
  const Tensor x = rnd({4, 6, 10}, 40), w = rnd({8, 10}, 41);
  EXPECT_LE(relative_error(matmul(x.to(gpu()), w.to(gpu()).t()).cpu(), matmul(f64(x), f64(w).t())), kStrictTol);
  EXPECT_LE(relative_error(matmul(x.to(gpu()).transpose(1, 2), rnd({6, 3}, 42).to(gpu())).cpu(),
                           matmul(f64(x).transpose(1, 2), f64(rnd({6, 3}, 42)))),
            kStrictTol);
  // A strided 1-D operand.
  const Tensor v = rnd({20}, 43);
  EXPECT_LE(relative_error(matmul(x.to(gpu()), v.to(gpu()).slice(0, 0, 20, 2)).cpu(),
                           matmul(f64(x), f64(v).slice(0, 0, 20, 2))),
            kStrictTol);
}

TEST(CudaLinalgTest, AddmmBroadcastSelfAndScalars) {
  QFLOW_REQUIRE_CUDA();
  const Tensor m1 = rnd({7, 5}, 50), m2 = rnd({5, 9}, 51);
  const std::vector<IntList> self_shapes = {{9}, {1, 9}, {7, 1}, {7, 9}, {}, {1}};
  uint64_t seed = 52;
  for (const IntList& s : self_shapes) {
    for (auto [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}, std::pair{-1.0, 0.25}}) {
      SCOPED_TRACE(fmt::format("self {} beta {} alpha {}", s, beta, alpha));
      const Tensor self = rnd(s, seed++);
      const Tensor want = addmm(f64(self), f64(m1), f64(m2), beta, alpha);
      const Tensor got = addmm(self.to(gpu()), m1.to(gpu()), m2.to(gpu()), beta, alpha);
      EXPECT_EQ(got.sizes(), want.sizes());
      EXPECT_LE(relative_error(got.cpu(), want), kStrictTol);
    }
  }
  // A linear layer: addmm(bias, x, weight.t()).
  const Tensor bias = rnd({6}, 60), w = rnd({6, 5}, 61);
  EXPECT_LE(relative_error(addmm(bias.to(gpu()), m1.to(gpu()), w.to(gpu()).t()).cpu(), addmm(f64(bias), f64(m1), f64(w).t())),
            kStrictTol);
}

TEST(CudaLinalgTest, AddmmBetaZeroIgnoresSelf) {
  QFLOW_REQUIRE_CUDA();
  const Tensor m1 = rnd({3, 4}, 70), m2 = rnd({4, 2}, 71);
  const Tensor nan_self = full({3, 2}, std::numeric_limits<double>::quiet_NaN(), DType::Float32, gpu());
  const Tensor got = addmm(nan_self, m1.to(gpu()), m2.to(gpu()), 0, 1);
  EXPECT_LE(relative_error(got.cpu(), mm(f64(m1), f64(m2))), kStrictTol);
  // An empty product (k = 0) leaves beta * self.
  const Tensor self = rnd({3, 2}, 72);
  const Tensor e = addmm(self.to(gpu()), zeros({3, 0}, DType::Float32, gpu()), zeros({0, 2}, DType::Float32, gpu()), 2, 1);
  EXPECT_LE(relative_error(e.cpu(), f64(self) * 2.0), kStrictTol);
  const Tensor z = addmm(nan_self, zeros({3, 0}, DType::Float32, gpu()), zeros({0, 2}, DType::Float32, gpu()), 0, 1);
  EXPECT_EQ(to_vector<float>(z.cpu()), std::vector<float>(6, 0.0f));
}

TEST(CudaLinalgTest, Float64) {
  QFLOW_REQUIRE_CUDA();
  const Tensor a = rnd({17, 33}, 80, DType::Float64), b = rnd({33, 9}, 81, DType::Float64);
  EXPECT_LE(relative_error(mm(a.to(gpu()), b.to(gpu())).cpu(), mm(a, b)), kFloat64Tol);
  EXPECT_LE(relative_error(mm(a.to(gpu()).t().contiguous().t(), b.to(gpu())).cpu(), mm(a, b)), kFloat64Tol);
  const Tensor x = rnd({3, 17, 33}, 82, DType::Float64);
  EXPECT_LE(relative_error(matmul(x.to(gpu()), b.to(gpu())).cpu(), matmul(x, b)), kFloat64Tol);
  const Tensor bias = rnd({9}, 83, DType::Float64);
  EXPECT_LE(relative_error(addmm(bias.to(gpu()), a.to(gpu()), b.to(gpu()), 0.5, 3).cpu(), addmm(bias, a, b, 0.5, 3)),
            kFloat64Tol);
}

TEST(CudaLinalgTest, LinearLayerGradientsMatchCpu) {
  QFLOW_REQUIRE_CUDA();
  const Tensor x = rnd({16, 32}, 90), w = rnd({10, 32}, 91), b = rnd({10}, 92), gy = rnd({16, 10}, 93);
  Tensor xc = f64(x).requires_grad_(), wc = f64(w).requires_grad_(), bc = f64(b).requires_grad_();
  addmm(bc, xc, wc.t()).backward(f64(gy));
  Tensor xg = x.to(gpu()).requires_grad_(), wg = w.to(gpu()).requires_grad_(), bg = b.to(gpu()).requires_grad_();
  addmm(bg, xg, wg.t()).backward(gy.to(gpu()));
  EXPECT_LE(relative_error(xg.grad().cpu(), xc.grad()), kStrictTol) << "input";
  EXPECT_LE(relative_error(wg.grad().cpu(), wc.grad()), kStrictTol) << "weight";
  EXPECT_LE(relative_error(bg.grad().cpu(), bc.grad()), kStrictTol) << "bias";
  // matmul on a 3-D input (the weight gradient sums over the batch).
  const Tensor x3 = rnd({2, 5, 32}, 94), gy3 = rnd({2, 5, 10}, 95);
  Tensor x3c = f64(x3).requires_grad_(), w3c = f64(w).requires_grad_();
  matmul(x3c, w3c.t()).backward(f64(gy3));
  Tensor x3g = x3.to(gpu()).requires_grad_(), w3g = w.to(gpu()).requires_grad_();
  matmul(x3g, w3g.t()).backward(gy3.to(gpu()));
  EXPECT_LE(relative_error(x3g.grad().cpu(), x3c.grad()), kStrictTol) << "3-D input";
  EXPECT_LE(relative_error(w3g.grad().cpu(), w3c.grad()), kStrictTol) << "3-D weight";
}

TEST(CudaLinalgTest, ErrorsNameTheOp) {
  QFLOW_REQUIRE_CUDA();
  const Tensor a = zeros({2, 3}, DType::Float32, gpu()), b = zeros({4, 5}, DType::Float32, gpu());
  std::string e = error_of([&] { mm(a, b); });
  EXPECT_NE(e.find("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"), std::string::npos) << e;
  e = error_of([&] { bmm(zeros({2, 2, 3}, DType::Float32, gpu()), zeros({3, 3, 2}, DType::Float32, gpu())); });
  EXPECT_NE(e.find("bmm: batch1 and batch2 must have the same batch size"), std::string::npos) << e;
  const Tensor i = zeros({2, 3}, DType::Int64, gpu()), j = zeros({3, 2}, DType::Int64, gpu());
  e = error_of([&] { mm(i, j); });
  EXPECT_NE(e.find("mm"), std::string::npos) << e;
  EXPECT_NE(e.find("int64"), std::string::npos) << e;
  EXPECT_NE(e.find("cuda"), std::string::npos) << e;
}

TEST(CudaLinalgTest, Tf32StaysWithinTf32Tolerance) {
  QFLOW_REQUIRE_CUDA();
  Tf32Guard tf32(true);
  const Tensor a = rnd({256, 512}, 100), b = rnd({512, 128}, 101);
  EXPECT_LE(relative_error(mm(a.to(gpu()), b.to(gpu())).cpu(), mm(f64(a), f64(b))), kTf32Tol);
  const Tensor x = rnd({8, 64, 96}, 102), y = rnd({8, 96, 80}, 103);
  EXPECT_LE(relative_error(bmm(x.to(gpu()), y.to(gpu())).cpu(), bmm(f64(x), f64(y))), kTf32Tol);
}
