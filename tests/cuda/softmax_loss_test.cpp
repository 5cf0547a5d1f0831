// CUDA softmax / log_softmax and losses (cuda/kernels/softmax_loss.cu) against the CPU kernels
// (core/kernels/reduction/softmax.cpp, loss.cpp): every dim (last, middle, first), the classifier's rows
// (10 and 1000 classes, and rows longer than a warp's registers hold), nll_loss and the fused
// cross_entropy with every reduction, class weights, ignore_index, label smoothing and spatial
// targets, mse/l1 losses, every backward, autograd, and determinism of the reduced losses.
//
// Tolerances: exp/log differ by an ulp or two between CUDA's libm and the CPU's vectorised
// versions, and row sums are added in another order (warp trees): 1e-5 relative covers
// float rounding of rows up to 10^4 elements. Reduced losses sum per-position values in double
// on both sides (different orders): same bound.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "qflow/qflow.h"

using namespace qflow;
using qflow::testing::gpu;
using qflow::testing_util::relative_error;

namespace {

constexpr double kTol = 1e-5;

const Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};

const char* name(Reduction r) { return r == Reduction::None ? "none" : (r == Reduction::Mean ? "mean" : "sum"); }

// Targets in [0, C) with every `ignore_every`-th one set to ignore_index.
Tensor targets(const std::vector<int64_t>& sizes, int64_t C, Generator& gen, int64_t ignore_every = 0,
               int64_t ignore_index = -100) {
  Tensor t = randint(0, C, sizes, DType::Int64, &gen);
  if (ignore_every > 0) {
    std::vector<int64_t> v = to_vector<int64_t>(t);
    for (size_t i = 0; i < v.size(); i += static_cast<size_t>(ignore_every)) v[i] = ignore_index;
    t = from_vector<int64_t>(v, sizes);
  }
  return t;
}

void check_softmax(const std::vector<int64_t>& sizes, int64_t dim, bool transposed = false, double tol = kTol) {
  SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(sizes) << " dim " << dim
                                    << (transposed ? " transposed" : ""));
  Generator gen(71 + sizes.back());
  Tensor x = randn(sizes, DType::Float32, &gen) * 3.0;
  Tensor xg = x.to(gpu());
  if (transposed && x.dim() >= 2) {  // a non-contiguous input
    x = x.transpose(0, 1);
    xg = xg.transpose(0, 1);
  }
  for (bool log : {false, true}) {
    const Tensor y_c = log ? log_softmax(x, dim) : softmax(x, dim);
    const Tensor y_g = log ? log_softmax(xg, dim) : softmax(xg, dim);
    EXPECT_LE(relative_error(y_g.cpu(), y_c), tol) << (log ? "log_softmax" : "softmax");
    const Tensor gy = randn(y_c.sizes(), DType::Float32, &gen);
    const Tensor gx_c = log ? log_softmax_backward(gy, y_c, dim) : softmax_backward(gy, y_c, dim);
    const Tensor gx_g = log ? log_softmax_backward(gy.to(gpu()), y_g, dim) : softmax_backward(gy.to(gpu()), y_g, dim);
    EXPECT_LE(relative_error(gx_g.cpu(), gx_c), tol) << (log ? "log_softmax_backward" : "softmax_backward");
  }
}

struct ClassCase {
  std::vector<int64_t> sizes;  // self: (N, C, ...) or (C)
  bool weighted;
  int64_t ignore_every;
  double smoothing;
};

void check_class_losses(const ClassCase& c) {
  const int64_t C = c.sizes.size() == 1 ? c.sizes[0] : c.sizes[1];
  std::vector<int64_t> tsizes;
  if (c.sizes.size() > 1) {
    tsizes.push_back(c.sizes[0]);
    for (size_t d = 2; d < c.sizes.size(); ++d) tsizes.push_back(c.sizes[d]);
  }
  Generator gen(81 + C + static_cast<int64_t>(c.sizes.size()));
  const Tensor x = randn(c.sizes, DType::Float32, &gen) * 2.0;
  const Tensor t = targets(tsizes, C, gen, c.ignore_every);
  const Tensor w = c.weighted ? rand({C}, DType::Float32, &gen) + 0.5 : Tensor();
  const Tensor xg = x.to(gpu()), tg = t.to(gpu());
  const Tensor wg = w.defined() ? w.to(gpu()) : Tensor();
  const Tensor lsm = log_softmax(x, c.sizes.size() == 1 ? 0 : 1);
  for (Reduction r : kReductions) {
    SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(c.sizes) << " " << name(r)
                                      << (c.weighted ? " weighted" : "") << " ignore_every " << c.ignore_every
                                      << " smoothing " << c.smoothing);
    const Tensor ce_c = cross_entropy(x, t, w, r, -100, c.smoothing);
    const Tensor ce_g = cross_entropy(xg, tg, wg, r, -100, c.smoothing);
    EXPECT_EQ(ce_g.sizes(), ce_c.sizes());
    EXPECT_LE(relative_error(ce_g.cpu(), ce_c), kTol) << "cross_entropy";
    const Tensor nll_c = nll_loss(lsm, t, w, r, -100);
    const Tensor nll_g = nll_loss(lsm.to(gpu()), tg, wg, r, -100);
    EXPECT_LE(relative_error(nll_g.cpu(), nll_c), kTol) << "nll_loss";

    const Tensor gy = r == Reduction::None ? randn(ce_c.sizes(), DType::Float32, &gen) : full({}, 0.7);
    EXPECT_LE(relative_error(cross_entropy_backward(gy.to(gpu()), xg, tg, wg, r, -100, c.smoothing).cpu(),
                             cross_entropy_backward(gy, x, t, w, r, -100, c.smoothing)),
              kTol)
        << "cross_entropy_backward";
    EXPECT_LE(relative_error(nll_loss_backward(gy.to(gpu()), lsm.to(gpu()), tg, wg, r, -100).cpu(),
                             nll_loss_backward(gy, lsm, t, w, r, -100)),
              kTol)
        << "nll_loss_backward";
  }
}

}  // namespace

TEST(CudaSoftmaxTest, LastDimRowsOfEveryWidth) {
  QFLOW_REQUIRE_CUDA();
  for (int64_t D : {1, 7, 10, 32, 33, 100, 1000, 1024, 1025, 5000}) check_softmax({37, D}, -1);
  check_softmax({128, 10}, 1);
  // One long row (the block-per-row path): a float sum of 10^6 terms in two different orders
  // differs by up to ~1e-5 relative (eps * sqrt(n) / 2), hence 1e-4.
  check_softmax({1000003}, 0, false, 1e-4);
}

TEST(CudaSoftmaxTest, OtherDimsAndNonContiguousInputs) {
  QFLOW_REQUIRE_CUDA();
  check_softmax({4, 10, 5, 6}, 1);  // the class dim of a spatial output
  check_softmax({7, 3, 9}, 0);
  check_softmax({7, 3, 9}, -2);
  check_softmax({10, 37}, 1, /*transposed=*/true);
  check_softmax({5, 6, 7}, 2, /*transposed=*/true);
}

TEST(CudaLossTest, CrossEntropyAndNllLossAllOptions) {
  QFLOW_REQUIRE_CUDA();
  const std::vector<ClassCase> cases = {
      {{128, 10}, false, 0, 0.0},       // CIFAR-10 / LeNet5
      {{128, 10}, false, 5, 0.0},       // ignore_index
      {{64, 1000}, true, 3, 0.0},       // class weights + ignore_index
      {{64, 1000}, false, 0, 0.1},      // label smoothing
      {{33, 7}, true, 4, 0.2},          // all of them, odd sizes
      {{4, 5, 3, 6}, true, 7, 0.1},     // spatial targets (N, d1, d2)
      {{4, 5, 3, 6}, false, 0, 0.0},
      {{10}, true, 0, 0.1},             // unbatched (C) input, 0-d target
      {{2000, 3}, false, 2, 0.0},
  };
  for (const ClassCase& c : cases) check_class_losses(c);
}

TEST(CudaLossTest, AllTargetsIgnoredGivesNanMeanLikeCpu) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(91);
  const Tensor x = randn({4, 3}, DType::Float32, &gen);
  const Tensor t = full({4}, -100, DType::Int64);
  const float want = cross_entropy(x, t).item<float>();
  const float got = cross_entropy(x.to(gpu()), t.to(gpu())).item<float>();
  EXPECT_TRUE(std::isnan(want));
  EXPECT_TRUE(std::isnan(got));
}

TEST(CudaLossTest, FusedCrossEntropyAutogradMatchesCpuAndIsDeterministic) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(93);
  const Tensor x = randn({128, 10}, DType::Float32, &gen);
  const Tensor t = targets({128}, 10, gen, 9);
  Tensor xc = x.clone();
  xc.requires_grad_();
  const Tensor lc = cross_entropy(xc, t);
  lc.backward();
  Tensor xg = x.to(gpu());
  xg.requires_grad_();
  const Tensor lg = cross_entropy(xg, t.to(gpu()));
  lg.backward();
  EXPECT_LE(relative_error(lg.cpu(), lc), kTol);
  EXPECT_LE(relative_error(xg.grad().cpu(), xc.grad()), kTol);
  // The same call again gives the same bits (no atomics in the reductions).
  const Tensor big = randn({4096, 1000}, DType::Float32, &gen).to(gpu());
  const Tensor bt = targets({4096}, 1000, gen, 11).to(gpu());
  EXPECT_EQ(cross_entropy(big, bt).item<float>(), cross_entropy(big, bt).item<float>());
  EXPECT_EQ(relative_error(cross_entropy_backward(full({}, 1.0).to(gpu()), big, bt, Tensor(), Reduction::Mean, -100, 0.0).cpu(),
                           cross_entropy_backward(full({}, 1.0).to(gpu()), big, bt, Tensor(), Reduction::Mean, -100, 0.0).cpu()),
            0.0);
}

TEST(CudaLossTest, MseAndL1LossesAndBackward) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(95);
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{1}, {7}, {1000003}, {8, 3, 5, 5}}) {
    const Tensor x = randn(sizes, DType::Float32, &gen), y = randn(sizes, DType::Float32, &gen);
    for (Reduction r : kReductions) {
      SCOPED_TRACE(::testing::Message() << "sizes " << ::testing::PrintToString(sizes) << " " << name(r));
      EXPECT_LE(relative_error(mse_loss(x.to(gpu()), y.to(gpu()), r).cpu(), mse_loss(x, y, r)), kTol);
      EXPECT_LE(relative_error(l1_loss(x.to(gpu()), y.to(gpu()), r).cpu(), l1_loss(x, y, r)), kTol);
      const Tensor g = r == Reduction::None ? randn(sizes, DType::Float32, &gen) : full({}, 1.5);
      EXPECT_LE(relative_error(mse_loss_backward(g.to(gpu()), x.to(gpu()), y.to(gpu()), r).cpu(),
                               mse_loss_backward(g, x, y, r)),
                kTol);
      EXPECT_LE(relative_error(l1_loss_backward(g.to(gpu()), x.to(gpu()), y.to(gpu()), r).cpu(),
                               l1_loss_backward(g, x, y, r)),
                kTol);
    }
  }
  // Mixed layouts: a channels-last input against a contiguous target.
  const Tensor x = randn({4, 6, 5, 5}, DType::Float32, &gen), y = randn({4, 6, 5, 5}, DType::Float32, &gen);
  const Tensor xcl = x.to(gpu()).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  EXPECT_LE(relative_error(mse_loss(xcl, y.to(gpu()), Reduction::None).cpu(), mse_loss(x, y, Reduction::None)), kTol);
  EXPECT_LE(relative_error(mse_loss(xcl, y.to(gpu())).cpu(), mse_loss(x, y)), kTol);
}

TEST(CudaLossTest, Float64AndUnsupportedDtype) {
  QFLOW_REQUIRE_CUDA();
  Generator gen(97);
  const Tensor x = randn({16, 10}, DType::Float32, &gen).to(DType::Float64);
  const Tensor t = targets({16}, 10, gen);
  EXPECT_LE(relative_error(cross_entropy(x.to(gpu()), t.to(gpu())).cpu(), cross_entropy(x, t)), 1e-12);
  EXPECT_LE(relative_error(log_softmax(x.to(gpu()), 1).cpu(), log_softmax(x, 1)), 1e-12);
  try {
    softmax(zeros({2, 3}, DType::Int64, gpu()), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
  }
}
