// Random factories: rand, randn, randint, randperm, rand_like, randn_like.
//
// Note [Counter-based draws]
// A draw reserves a contiguous range of Philox blocks from the current generator (see Note
// [Passing the generator]) and fills element i from block first + i / per_block, lane
// i % per_block. Element i therefore depends only on (seed, offset + i): blocks are filled in
// parallel in any order and the result is the same for every thread count and machine; the
// generator's offset advances by exactly the blocks the draw consumed.
// Lemire's unbiased bounded integers (randint, randperm) sometimes reject a word; the redraws
// come from the element's private retry stream, Philox counter {lo(block), hi(block), attempt,
// lane} with attempt >= 1, which never meets the main stream (words 2 and 3 are 0 there) and
// does not move the offset.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "kernels/common/kernel_utils.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"

namespace qflow {
namespace kernels {
namespace {

using Block = std::array<uint32_t, 4>;

// A Philox block costs about as much as a dozen element-wise operations.
constexpr int64_t kBlockGrain = kParallelGrain / 8;

// Reserves the blocks for `n` elements, `per` elements per block, and calls
// fn(first_element, count, block_index, words) for every block, in parallel.
template <typename Fn>
void fill_blocks(int64_t n, int64_t per, const Fn& fn) {
  if (n == 0) return;
  Generator& gen = current_generator();
  const int64_t blocks = (n + per - 1) / per;
  const uint64_t first = gen.reserve(static_cast<uint64_t>(blocks));
  parallel_for(blocks, kBlockGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint64_t index = first + static_cast<uint64_t>(i);
      fn(i * per, std::min(per, n - i * per), index, gen.block(index));
    }
  });
}

uint64_t join(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// [0, 1) from the top 24 bits (float32) or 53 bits (float64): every value is exactly
// representable and 1 is never produced.
float unit_float(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
double unit_double(uint64_t w) { return static_cast<double>(w >> 11) * 0x1p-53; }
// (0, 1), for Box-Muller's logarithm.
double open_unit32(uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1p-32; }
double open_unit64(uint64_t w) { return (static_cast<double>(w >> 11) + 0.5) * 0x1p-53; }

// Box-Muller: two independent uniforms give two independent standard normals.
void box_muller(double u1, double u2, double& z0, double& z1) {
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  z0 = r * std::cos(theta);
  z1 = r * std::sin(theta);
}

// x: (n,) contiguous, float32 or float64.
void fill_uniform(const Tensor& x) {
  const int64_t n = x.numel();
  if (x.dtype() == DType::Float32) {
    float* p = x.data_ptr<float>();
    fill_blocks(n, 4, [p](int64_t at, int64_t count, uint64_t, const Block& w) {
      for (int64_t l = 0; l < count; ++l) p[at + l] = unit_float(w[l]);
    });
  } else {
    double* p = x.data_ptr<double>();
    fill_blocks(n, 2, [p](int64_t at, int64_t count, uint64_t, const Block& w) {
      for (int64_t l = 0; l < count; ++l) p[at + l] = unit_double(join(w[2 * l], w[2 * l + 1]));
    });
  }
}

// x: (n,) contiguous, float32 or float64. Normals are computed in double and rounded once.
void fill_normal(const Tensor& x) {
  const int64_t n = x.numel();
  if (x.dtype() == DType::Float32) {
    float* p = x.data_ptr<float>();
    fill_blocks(n, 4, [p](int64_t at, int64_t count, uint64_t, const Block& w) {
      double z[4];
      box_muller(open_unit32(w[0]), open_unit32(w[1]), z[0], z[1]);
      box_muller(open_unit32(w[2]), open_unit32(w[3]), z[2], z[3]);
      for (int64_t l = 0; l < count; ++l) p[at + l] = static_cast<float>(z[l]);
    });
  } else {
    double* p = x.data_ptr<double>();
    fill_blocks(n, 2, [p](int64_t at, int64_t count, uint64_t, const Block& w) {
      double z[2];
      box_muller(open_unit64(join(w[0], w[1])), open_unit64(join(w[2], w[3])), z[0], z[1]);
      for (int64_t l = 0; l < count; ++l) p[at + l] = z[l];
    });
  }
}

// Unbiased integers in [0, range) by Lemire's multiply-and-reject ("Fast random integer
// generation in an interval", 2019). Narrow draws take one 32-bit word (range <= 2^32), wide
// ones two words (range up to 2^64 - 1); rejected words are redrawn from the retry stream of
// (block, lane), see Note [Counter-based draws].
class BoundedDraw {
 public:
  static bool fits_narrow(uint64_t range) { return range <= (uint64_t{1} << 32); }

  BoundedDraw(bool narrow, std::array<uint32_t, 2> key) : narrow_(narrow), key_(key) {}
  int64_t per_block() const { return narrow_ ? 4 : 2; }

  /// Lane `lane` of main-stream block `index` (whose words are `w`) mapped to [0, range).
  uint64_t operator()(uint64_t range, uint64_t index, uint32_t lane, const Block& w) const {
    // Values of the low product half below `threshold` would over-represent some results.
    const uint64_t threshold = narrow_ ? ((uint64_t{1} << 32) - range) % range : (0 - range) % range;
    uint64_t x = narrow_ ? w[lane] : join(w[2 * lane], w[2 * lane + 1]);
    for (uint32_t attempt = 1;; ++attempt) {
      const unsigned __int128 m = static_cast<unsigned __int128>(x) * range;
      const uint64_t low = narrow_ ? static_cast<uint32_t>(m) : static_cast<uint64_t>(m);
      if (low >= threshold) return static_cast<uint64_t>(narrow_ ? m >> 32 : m >> 64);
      const Block r = philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), attempt, lane}, key_);
      x = narrow_ ? r[0] : join(r[0], r[1]);
    }
  }

 private:
  bool narrow_;
  std::array<uint32_t, 2> key_;
};

void check_floating(const char* op, DType dtype) {
  QFLOW_CHECK(is_floating(dtype), "{}: expected a floating point dtype (float32 or float64), got {}", op, dtype);
}

// ---- rand / randn / rand_like / randn_like -------------------------------------------------

template <bool Normal>
constexpr const char* float_op_name() { return Normal ? "randn" : "rand"; }

template <bool Normal>
std::vector<TensorMeta> float_meta(const OpArgs& a) {
  const IntList sizes = a.int_list("size");
  checked_numel(sizes, float_op_name<Normal>());
  check_floating(float_op_name<Normal>(), a.dtype("dtype"));
  return one(sizes, a.dtype("dtype"));
}

template <bool Normal>
Tensor float_draw(const IntList& sizes, DType dtype) {
  Tensor t = new_tensor(sizes, dtype);
  if constexpr (Normal) fill_normal(t);
  else fill_uniform(t);
  return t;
}

template <bool Normal>
Stack float_kernel(OpArgs& a) {
  const TensorMeta m = float_meta<Normal>(a)[0];
  return out(float_draw<Normal>(m.sizes, m.dtype));
}

template <bool Normal>
std::vector<TensorMeta> float_like_meta(const OpArgs& a) {
  const Tensor& self = a.tensor("self");
  check_floating(Normal ? "randn_like" : "rand_like", self.dtype());
  return one(self.sizes(), self.dtype());
}

template <bool Normal>
Stack float_like_kernel(OpArgs& a) {
  const TensorMeta m = float_like_meta<Normal>(a)[0];
  return out(float_draw<Normal>(m.sizes, m.dtype));
}

// ---- randint -------------------------------------------------------------------------------

// [low, high) must hold only values `dtype` represents exactly (PyTorch refuses the same).
void check_randint_range(int64_t low, int64_t high, DType dtype) {
  QFLOW_CHECK(low < high, "randint: expected low < high, got low={} and high={}", low, high);
  const int64_t last = high - 1;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t lo = 0, hi = 0;
    if constexpr (std::is_same_v<T, bool>) hi = 1;
    else if constexpr (std::is_same_v<T, float>) lo = -(int64_t{1} << 24), hi = int64_t{1} << 24;
    else if constexpr (std::is_same_v<T, double>) lo = -(int64_t{1} << 53), hi = int64_t{1} << 53;
    else lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    QFLOW_CHECK(low >= lo && last <= hi, "randint: range [{}, {}) is not representable in {} (allowed [{}, {}])", low,
                high, dtype, lo, hi);
  });
}

std::vector<TensorMeta> randint_meta(const OpArgs& a) {
  const IntList sizes = a.int_list("size");
  checked_numel(sizes, "randint");
  check_randint_range(a.to_int("low"), a.to_int("high"), a.dtype("dtype"));
  return one(sizes, a.dtype("dtype"));
}

// out: any shape, contiguous; values low + Lemire(high - low).
Stack randint_kernel(OpArgs& a) {
  const TensorMeta m = randint_meta(a)[0];
  const int64_t low = a.to_int("low");
  const uint64_t range = static_cast<uint64_t>(a.to_int("high")) - static_cast<uint64_t>(low);  // wraps correctly
  Tensor t = new_tensor(m.sizes, m.dtype);
  const BoundedDraw draw(BoundedDraw::fits_narrow(range), current_generator().key());
  visit_dtype(m.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_ptr<T>();
    fill_blocks(t.numel(), draw.per_block(), [&](int64_t at, int64_t count, uint64_t index, const Block& w) {
      for (int64_t l = 0; l < count; ++l) {
        const uint64_t v = static_cast<uint64_t>(low) + draw(range, index, static_cast<uint32_t>(l), w);
        p[at + l] = static_cast<T>(static_cast<int64_t>(v));
      }
    });
  });
  return out(t);
}

// ---- randperm ------------------------------------------------------------------------------

std::vector<TensorMeta> randperm_meta(const OpArgs& a) {
  const int64_t n = a.to_int("n");
  QFLOW_CHECK(n >= 0, "randperm: n must be non-negative, got {}", n);
  return one({n}, DType::Int64);
}

// out: (n,) int64. Fisher-Yates from the back: step k (k = 0 .. n-2) swaps position
// i = n-1-k with j uniform in [0, i]. The j's depend only on the step, not on the array, so
// they are drawn in parallel first (draw k = element k of the draw) and applied in order.
Stack randperm_kernel(OpArgs& a) {
  const int64_t n = randperm_meta(a)[0].sizes[0];
  Tensor t = new_tensor({n}, DType::Int64);
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  if (n < 2) return out(t);
  // One word width for the whole draw, chosen by the largest bound (n).
  const BoundedDraw draw(BoundedDraw::fits_narrow(static_cast<uint64_t>(n)), current_generator().key());
  std::vector<int64_t> j(static_cast<size_t>(n - 1));
  fill_blocks(n - 1, draw.per_block(), [&](int64_t at, int64_t count, uint64_t index, const Block& w) {
    for (int64_t l = 0; l < count; ++l) {
      const uint64_t bound = static_cast<uint64_t>(n - (at + l));  // i + 1 for i = n-1-k
      j[static_cast<size_t>(at + l)] = static_cast<int64_t>(draw(bound, index, static_cast<uint32_t>(l), w));
    }
  });
  for (int64_t k = 0; k < n - 1; ++k) std::swap(p[n - 1 - k], p[j[static_cast<size_t>(k)]]);
  return out(t);
}

}  // namespace
}  // namespace kernels

// ---- typed API: the generator travels in a GeneratorGuard (see Note [Passing the generator]) ----

Tensor rand(const IntList& sizes, DType dtype, Generator* gen, Device device) {
  QFLOW_OP_HANDLE("rand");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"size", sizes}, {"dtype", dtype}}).to(device);
}
Tensor randn(const IntList& sizes, DType dtype, Generator* gen, Device device) {
  QFLOW_OP_HANDLE("randn");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"size", sizes}, {"dtype", dtype}}).to(device);
}
Tensor randint(int64_t low, int64_t high, const IntList& sizes, DType dtype, Generator* gen) {
  QFLOW_OP_HANDLE("randint");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"low", low}, {"high", high}, {"size", sizes}, {"dtype", dtype}});
}
Tensor randperm(int64_t n, Generator* gen) {
  QFLOW_OP_HANDLE("randperm");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"n", n}});
}
Tensor rand_like(const Tensor& t, Generator* gen) {
  QFLOW_OP_HANDLE("rand_like");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"self", t}});
}
Tensor randn_like(const Tensor& t, Generator* gen) {
  QFLOW_OP_HANDLE("randn_like");
  GeneratorGuard guard(gen);
  return call_tensor(op, {{"self", t}});
}

}  // namespace qflow

// The registration and typed functions of core/ops/random.toml (Note [One declaration per op]).
#include "core/ops/random.inc"
