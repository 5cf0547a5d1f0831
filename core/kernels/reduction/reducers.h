#pragma once
// Reducers shared by the reduction kernels (the Reducer interface is in Note [Reduction loops]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace qflow::kernels {

/// Sums accumulate floating types in double (a float32 sum of 10M elements stays exact to
/// float precision) and integral types (bool included) in int64, like PyTorch.
template <typename T>
using sum_acc_t = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

/// Independent accumulators per row: enough to hide the add latency of two vector units.
inline constexpr int kLanes = 16;

/// Pairwise sum of the lanes.
template <typename Acc>
Acc fold_lanes(Acc* lane) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

/// Sum of p[0, n) in Acc: independent lanes let the compiler vectorise without reassociating
/// one chain, and blocks keep every partial sum short (cascade summation).
template <typename Acc, typename T>
Acc lane_sum(const T* p, int64_t n) {
  constexpr int64_t kBlock = 2048;
  Acc total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    Acc lane[kLanes] = {};
    int64_t i = b;
    for (; i + kLanes <= e; i += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<Acc>(p[i + l]);
    for (int l = 0; i < e; ++i, ++l) lane[l] += static_cast<Acc>(p[i]);
    total += fold_lanes(lane);
  }
  return total;
}

/// out[o] = scale * sum (scale only applies to floating inputs: it turns a sum into a mean).
template <typename T, typename TOut>
struct SumReducer {
  using input_t = T;
  using acc_t = sum_acc_t<T>;
  TOut* out;
  double scale = 1.0;

  acc_t init(int64_t) const { return 0; }
  void step(acc_t& a, T v, int64_t) const { a += static_cast<acc_t>(v); }
  void row(acc_t& a, const T* p, int64_t stride, int64_t n, int64_t) const {
    if (stride == 1) {
      a += lane_sum<acc_t>(p, n);
      return;
    }
    acc_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<acc_t>(p[i * stride]);
    a += s;
  }
  void combine(acc_t& a, const acc_t& b) const { a += b; }
  void write(int64_t o, const acc_t& a) const {
    if constexpr (std::is_floating_point_v<acc_t>) out[o] = static_cast<TOut>(a * scale);
    else out[o] = static_cast<TOut>(a);
  }
};

/// Ordering used by max/min reductions. NaN wins over everything (PyTorch propagates NaN).
template <typename T, bool IsMax>
struct Extremum {
  static T identity() {
    if constexpr (std::is_floating_point_v<T>) return IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  /// The better of a and v; branch-free so lane loops vectorise.
  static T pick(T a, T v) {
    const bool wins = IsMax ? (v > a) : (v < a);
    if constexpr (std::is_floating_point_v<T>) return (wins || v != v) ? v : a;
    else return wins ? v : a;
  }
  /// True when v strictly beats a (ties keep the earlier element; the first NaN wins).
  static bool beats(T v, T a) {
    const bool wins = IsMax ? (v > a) : (v < a);
    if constexpr (std::is_floating_point_v<T>) return wins || (v != v && a == a);
    else return wins;
  }
  /// The extremum of p[0, n*stride), NaN if any element is NaN. The NaN test is separate so
  /// the main loop is a plain max/min reduction, which `omp simd` vectorises (GCC will not
  /// vectorise the NaN-aware select on its own).
  static T of_row(const T* p, int64_t stride, int64_t n) {
    T best = identity();
    if (stride != 1) {
      for (int64_t i = 0; i < n; ++i) best = pick(best, p[i * stride]);
      return best;
    }
    int nan = 0;
    if constexpr (IsMax) {
#pragma omp simd reduction(max : best) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        const T v = p[i];
        best = v > best ? v : best;
        if constexpr (std::is_floating_point_v<T>) nan |= (v != v);
      }
    } else {
#pragma omp simd reduction(min : best) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        const T v = p[i];
        best = v < best ? v : best;
        if constexpr (std::is_floating_point_v<T>) nan |= (v != v);
      }
    }
    if constexpr (std::is_floating_point_v<T>)
      if (nan) return std::numeric_limits<T>::quiet_NaN();
    return best;
  }
  /// Position of the first element of p[0, n*stride) equal to `value` (NaN matches NaN);
  /// `value` must occur. Contiguous rows are scanned a block at a time.
  static int64_t find(const T* p, int64_t stride, int64_t n, T value) {
    auto hit = [value](T v) {
      if constexpr (std::is_floating_point_v<T>) return value != value ? v != v : v == value;
      else return v == value;
    };
    int64_t i = 0;
    if (stride == 1) {
      constexpr int64_t kBlock = 64;
      for (; i + kBlock <= n; i += kBlock) {
        int any = 0;
#pragma omp simd reduction(| : any)
        for (int64_t j = i; j < i + kBlock; ++j) any |= hit(p[j]);
        if (any) break;
      }
    }
    while (!hit(p[i * stride])) ++i;
    return i;
  }
};

/// amax/amin and max()/min() of everything: out[o] = extremum.
template <typename T, bool IsMax>
struct ExtremumReducer {
  using input_t = T;
  using acc_t = T;
  using E = Extremum<T, IsMax>;
  T* out;

  acc_t init(int64_t) const { return E::identity(); }
  void step(acc_t& a, T v, int64_t) const { a = E::pick(a, v); }
  void row(acc_t& a, const T* p, int64_t stride, int64_t n, int64_t) const { a = E::pick(a, E::of_row(p, stride, n)); }
  void combine(acc_t& a, const acc_t& b) const { a = E::pick(a, b); }
  void write(int64_t o, const acc_t& a) const { out[o] = a; }
};

/// max.dim/min.dim/argmax/argmin: value and position of the first extremum (first NaN).
template <typename T, bool IsMax>
struct ArgExtremumReducer {
  struct acc_t {
    T value;
    int64_t index;
  };
  using input_t = T;
  using E = Extremum<T, IsMax>;
  T* values;  // may be null (argmax)
  int64_t* indices;

  acc_t init(int64_t) const { return {E::identity(), 0}; }
  void step(acc_t& a, T v, int64_t idx) const {
    if (E::beats(v, a.value)) a = {v, idx};
  }
  // Two passes over a row that is in cache: the vectorised extremum, then its first position.
  void row(acc_t& a, const T* p, int64_t stride, int64_t n, int64_t idx0) const {
    const T best = E::of_row(p, stride, n);
    if (!E::beats(best, a.value)) return;
    const int64_t i = E::find(p, stride, n, best);
    a = {p[i * stride], idx0 + i};  // the element itself: -0.0 and 0.0 compare equal
  }
  void combine(acc_t& a, const acc_t& b) const {
    if (E::beats(b.value, a.value)) a = b;
  }
  void write(int64_t o, const acc_t& a) const {
    if (values) values[o] = a.value;
    indices[o] = a.index;
  }
};

}  // namespace qflow::kernels
