// Plans of the cuDNN convolutions and the cache of channels-last filters; see Note [cuDNN
// convolutions] in conv_ops.cpp.
#include "conv_plan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "kernels/conv.cuh"
#include "qflow/core/error.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "src/caching_allocator.h"
#include "src/cuda_ops.h"

namespace qflow::cuda::conv {

// ---- geometry ---------------------------------------------------------------------------------

namespace {

std::pair<int64_t, int64_t> expand_pair(const IntList& v, const char* arg, const char* op) {
  QFLOW_CHECK(v.size() == 1 || v.size() == 2, "{}: expected {} to have 1 or 2 values, got {}", op, arg, v);
  return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]};
}

}  // namespace

std::vector<int64_t> Geometry::output_sizes() const {
  if (batched) return {n, o, oh, ow};
  return {o, oh, ow};
}

Geometry geometry(const std::vector<int64_t>& input, const std::vector<int64_t>& weight, const IntList& stride,
                  const IntList& padding, const IntList& dilation, int64_t groups, const char* op) {
  QFLOW_CHECK(input.size() == 3 || input.size() == 4,
              "{}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got input of shape {}", op, input);
  QFLOW_CHECK(weight.size() == 4, "{}: expected a 4-D weight (O, C / groups, kH, kW), got weight of shape {}", op, weight);
  QFLOW_CHECK(groups > 0, "{}: groups must be positive, got {}", op, groups);
  Geometry g;
  g.batched = input.size() == 4;
  const size_t b = g.batched ? 1 : 0;
  g.n = g.batched ? input[0] : 1;
  g.c = input[b];
  g.h = input[b + 1];
  g.w = input[b + 2];
  g.o = weight[0];
  g.kh = weight[2];
  g.kw = weight[3];
  g.groups = groups;
  QFLOW_CHECK(g.o % groups == 0, "{}: groups={} does not divide the {} output channels of weight of shape {}", op, groups,
              g.o, weight);
  QFLOW_CHECK(g.c % groups == 0, "{}: groups={} does not divide the {} channels of input of shape {}", op, groups, g.c,
              input);
  QFLOW_CHECK(weight[1] * groups == g.c,
              "{}: expected input with {} channels for weight of shape {} and groups={}, got input of shape {}", op,
              weight[1] * groups, weight, groups, input);
  QFLOW_CHECK(g.kh > 0 && g.kw > 0 && g.o > 0, "{}: weight of shape {} is empty", op, weight);
  std::tie(g.sh, g.sw) = expand_pair(stride, "stride", op);
  std::tie(g.ph, g.pw) = expand_pair(padding, "padding", op);
  std::tie(g.dh, g.dw) = expand_pair(dilation, "dilation", op);
  QFLOW_CHECK(g.sh > 0 && g.sw > 0, "{}: stride must be positive, got {}", op, stride);
  QFLOW_CHECK(g.dh > 0 && g.dw > 0, "{}: dilation must be positive, got {}", op, dilation);
  QFLOW_CHECK(g.ph >= 0 && g.pw >= 0, "{}: padding must be non-negative, got {}", op, padding);
  const int64_t eh = g.dh * (g.kh - 1) + 1, ew = g.dw * (g.kw - 1) + 1;  // dilated kernel extent
  QFLOW_CHECK(eh <= g.h + 2 * g.ph && ew <= g.w + 2 * g.pw,
              "{}: kernel of size [{}, {}] (dilation {}, extent [{}, {}]) is larger than the padded input of size [{}, {}] "
              "(input of shape {}, padding {})",
              op, g.kh, g.kw, dilation, eh, ew, g.h + 2 * g.ph, g.w + 2 * g.pw, input, padding);
  g.oh = (g.h + 2 * g.ph - eh) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - ew) / g.sw + 1;
  return g;
}

// ---- plans ------------------------------------------------------------------------------------

namespace {

/// The most workspace an algorithm may use (the search allocates up to this much once per
/// plan and pass; faster algorithms needing more, FFT ones on big layers, are skipped).
constexpr size_t kMaxWorkspace = size_t{256} << 20;

int to_int(int64_t v, const char* what, const char* op) {
  QFLOW_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "{}: {} = {} does not fit cuDNN's 32-bit sizes", op, what,
              v);
  return static_cast<int>(v);
}

cudnnDataType_t data_type(DType dtype) {
  QFLOW_ASSERT(dtype == DType::Float32 || dtype == DType::Float64, "cuDNN convolution of {}", dtype);
  return dtype == DType::Float32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
}

bool strict_fp32(const PlanSpec& s) { return s.dtype == DType::Float32 && !s.tf32; }

// What the descriptors start with: FMA kernels only for strict float32 (no TF32), otherwise
// cuDNN's default, which permits TF32 tensor cores for float32 on Ampere and later.
cudnnMathType_t initial_math(const PlanSpec& s) { return strict_fp32(s) ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH; }

// The math type an algorithm found under `s` runs with, or false when it may not run: strict
// float32 refuses the tensor-op math types (TF32) and runs everything else as FMA.
bool allowed_math(const PlanSpec& s, cudnnMathType_t found, cudnnMathType_t* use) {
  if (strict_fp32(s)) {
    if (found == CUDNN_TENSOR_OP_MATH || found == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    *use = CUDNN_FMA_MATH;
    return true;
  }
  if (found == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;  // float16 down-conversion: never
  *use = found;
  return true;
}

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::Forward: return "forward";
    case Pass::BackwardData: return "backward-data";
    case Pass::BackwardFilter: return "backward-filter";
  }
  return "?";
}

// The cuDNN calls of one pass, so that one search routine serves the three.
struct ForwardCalls {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using AlgoT = cudnnConvolutionFwdAlgo_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  const Plan& plan;
  cudnnHandle_t h;
  const void* x;
  const void* w;
  void* y;
  cudnnStatus_t max_count(int* n) const { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
  cudnnStatus_t workspace(AlgoT a, size_t* bytes) const {
    return cudnnGetConvolutionForwardWorkspaceSize(h, plan.x_desc(), plan.w_desc(), plan.conv_desc(Pass::Forward),
                                                   plan.y_desc(), a, bytes);
  }
  cudnnStatus_t find(int requested, int* returned, Perf* perf, void* ws, size_t ws_bytes) const {
    return cudnnFindConvolutionForwardAlgorithmEx(h, plan.x_desc(), x, plan.w_desc(), w, plan.conv_desc(Pass::Forward),
                                                  plan.y_desc(), y, requested, returned, perf, ws, ws_bytes);
  }
  cudnnStatus_t heuristic(int requested, int* returned, Perf* perf) const {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, plan.x_desc(), plan.w_desc(), plan.conv_desc(Pass::Forward),
                                                  plan.y_desc(), requested, returned, perf);
  }
};

struct BackwardDataCalls {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using AlgoT = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  const Plan& plan;
  cudnnHandle_t h;
  const void* w;
  const void* dy;
  void* dx;
  cudnnStatus_t max_count(int* n) const { return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n); }
  cudnnStatus_t workspace(AlgoT a, size_t* bytes) const {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, plan.w_desc(), plan.y_desc(),
                                                        plan.conv_desc(Pass::BackwardData), plan.x_desc(), a, bytes);
  }
  cudnnStatus_t find(int requested, int* returned, Perf* perf, void* ws, size_t ws_bytes) const {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, plan.w_desc(), w, plan.y_desc(), dy,
                                                       plan.conv_desc(Pass::BackwardData), plan.x_desc(), dx,
                                                       requested, returned, perf, ws, ws_bytes);
  }
  cudnnStatus_t heuristic(int requested, int* returned, Perf* perf) const {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, plan.w_desc(), plan.y_desc(),
                                                       plan.conv_desc(Pass::BackwardData), plan.x_desc(), requested,
                                                       returned, perf);
  }
};

struct BackwardFilterCalls {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using AlgoT = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  const Plan& plan;
  cudnnHandle_t h;
  const void* x;
  const void* dy;
  void* dw;
  cudnnStatus_t max_count(int* n) const { return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n); }
  cudnnStatus_t workspace(AlgoT a, size_t* bytes) const {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, plan.x_desc(), plan.y_desc(),
                                                          plan.conv_desc(Pass::BackwardFilter), plan.w_desc(), a, bytes);
  }
  cudnnStatus_t find(int requested, int* returned, Perf* perf, void* ws, size_t ws_bytes) const {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, plan.x_desc(), x, plan.y_desc(), dy,
                                                         plan.conv_desc(Pass::BackwardFilter), plan.w_desc(), dw,
                                                         requested, returned, perf, ws, ws_bytes);
  }
  cudnnStatus_t heuristic(int requested, int* returned, Perf* perf) const {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, plan.x_desc(), plan.y_desc(),
                                                         plan.conv_desc(Pass::BackwardFilter), plan.w_desc(),
                                                         requested, returned, perf);
  }
};

struct Counters {
  int64_t algo_searches = 0, weight_copies = 0, weight_reuses = 0;
};
std::mutex counters_mutex;
Counters counters;

// The first of `perf` (cuDNN's order: fastest first) that succeeded, fits kMaxWorkspace and
// runs under the plan's math rules; sets conv's math type to it. False when none does.
template <typename Calls>
bool take_first(const PlanSpec& spec, const Calls& calls, cudnnConvolutionDescriptor_t conv,
                const typename Calls::Perf* perf, int count, Algo* out) {
  for (int i = 0; i < count; ++i) {
    const auto& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
    if (spec.deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    cudnnMathType_t math;
    if (!allowed_math(spec, p.mathType, &math)) continue;
    if (cudnnSetConvolutionMathType(conv, math) != CUDNN_STATUS_SUCCESS) continue;
    // The workspace under the math type it will run with; an algorithm that cannot run so
    // (the query fails) is skipped.
    size_t bytes = 0;
    if (calls.workspace(p.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    *out = Algo{static_cast<int>(p.algo), std::max(bytes, p.memory)};
    return true;
  }
  cudnnSetConvolutionMathType(conv, initial_math(spec));
  return false;
}

// Benchmarks the pass's algorithms once (Note [cuDNN convolutions]: choosing the algorithm).
template <typename Calls>
Algo search(const PlanSpec& spec, const Calls& calls, Pass pass, const char* op) {
  cudnnConvolutionDescriptor_t conv = calls.plan.conv_desc(pass);
  int max_count = 0;
  QFLOW_CUDNN_CHECK(calls.max_count(&max_count), fmt::format("{}: cudnnGetConvolution*AlgorithmMaxCount", op).c_str());
  max_count = std::max(max_count, Calls::kAlgoCount);
  // Workspace for the search: the largest any algorithm asks for, up to kMaxWorkspace.
  size_t limit = 0;
  for (int a = 0; a < Calls::kAlgoCount; ++a) {
    size_t bytes = 0;
    if (calls.workspace(static_cast<typename Calls::AlgoT>(a), &bytes) == CUDNN_STATUS_SUCCESS && bytes <= kMaxWorkspace)
      limit = std::max(limit, bytes);
  }
  std::shared_ptr<Storage> ws;
  try {
    ws = workspace(limit, spec.device);
  } catch (const Error&) {  // out of memory: search among the algorithms that need none
    limit = 0;
    ws = workspace(0, spec.device);
  }
  std::vector<typename Calls::Perf> perf(static_cast<size_t>(max_count));
  int returned = 0;
  QFLOW_CUDNN_CHECK(calls.find(max_count, &returned, perf.data(), limit ? ws->data() : nullptr, limit),
                    fmt::format("{}: cudnnFindConvolution*AlgorithmEx ({})", op, pass_name(pass)).c_str());
  Algo algo;
  if (take_first(spec, calls, conv, perf.data(), returned, &algo)) return algo;
  // Nothing timed fits: cuDNN's heuristic ranking, same rules.
  returned = 0;
  QFLOW_CUDNN_CHECK(calls.heuristic(max_count, &returned, perf.data()),
                    fmt::format("{}: cudnnGetConvolution*Algorithm_v7 ({})", op, pass_name(pass)).c_str());
  if (take_first(spec, calls, conv, perf.data(), returned, &algo)) return algo;
  const Geometry& g = spec.g;
  QFLOW_FAIL(
      "{}: cuDNN has no {} algorithm for input [{}, {}, {}, {}], weight [{}, {}, {}, {}], stride [{}, {}], padding "
      "[{}, {}], dilation [{}, {}], groups={} in {} ({}{})",
      op, pass_name(pass), g.n, g.c, g.h, g.w, g.o, g.cg(), g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups,
      spec.dtype, spec.nhwc ? "channels-last" : "NCHW",
      std::string(strict_fp32(spec) ? ", strict float32" : "") + (spec.deterministic ? ", deterministic" : ""));
}

}  // namespace

Plan::Plan(const PlanSpec& spec) : spec_(spec) {
  const Geometry& g = spec.g;
  constexpr const char* op = "conv2d";
  const cudnnDataType_t dt = data_type(spec.dtype);
  const cudnnTensorFormat_t format = spec.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  try {
    QFLOW_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_), "conv2d: cudnnCreateTensorDescriptor");
    QFLOW_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_), "conv2d: cudnnCreateTensorDescriptor");
    QFLOW_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_), "conv2d: cudnnCreateFilterDescriptor");
    QFLOW_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, format, dt, to_int(g.n, "N", op), to_int(g.c, "C", op),
                                                 to_int(g.h, "H", op), to_int(g.w, "W", op)),
                      "conv2d: cudnnSetTensor4dDescriptor (input)");
    QFLOW_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, format, dt, to_int(g.n, "N", op), to_int(g.o, "O", op),
                                                 to_int(g.oh, "Ho", op), to_int(g.ow, "Wo", op)),
                      "conv2d: cudnnSetTensor4dDescriptor (output)");
    QFLOW_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, dt, format, to_int(g.o, "O", op), to_int(g.cg(), "C / groups", op),
                                                 to_int(g.kh, "kH", op), to_int(g.kw, "kW", op)),
                      "conv2d: cudnnSetFilter4dDescriptor");
    for (auto& conv : conv_) {
      QFLOW_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv), "conv2d: cudnnCreateConvolutionDescriptor");
      QFLOW_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, to_int(g.ph, "padding", op), to_int(g.pw, "padding", op),
                                                        to_int(g.sh, "stride", op), to_int(g.sw, "stride", op),
                                                        to_int(g.dh, "dilation", op), to_int(g.dw, "dilation", op),
                                                        CUDNN_CROSS_CORRELATION, dt),
                        "conv2d: cudnnSetConvolution2dDescriptor");
      QFLOW_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, to_int(g.groups, "groups", op)),
                        "conv2d: cudnnSetConvolutionGroupCount");
      QFLOW_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, initial_math(spec)), "conv2d: cudnnSetConvolutionMathType");
    }
  } catch (...) {
    release();  // a constructor that throws gets no destructor call
    throw;
  }
}

Plan::~Plan() { release(); }

void Plan::release() {
  for (auto& conv : conv_)
    if (conv) cudnnDestroyConvolutionDescriptor(std::exchange(conv, nullptr));
  if (w_) cudnnDestroyFilterDescriptor(std::exchange(w_, nullptr));
  if (y_) cudnnDestroyTensorDescriptor(std::exchange(y_, nullptr));
  if (x_) cudnnDestroyTensorDescriptor(std::exchange(x_, nullptr));
}

Algo Plan::forward(cudnnHandle_t handle, const void* x, const void* w, void* y, const char* op) {
  std::lock_guard lock(mutex_);
  constexpr int p = static_cast<int>(Pass::Forward);
  if (!chosen_[p]) {
    algo_[p] = search(spec_, ForwardCalls{*this, handle, x, w, y}, Pass::Forward, op);
    chosen_[p] = true;
    std::lock_guard c(counters_mutex);
    ++counters.algo_searches;
  }
  return algo_[p];
}

Algo Plan::backward_data(cudnnHandle_t handle, const void* w, const void* dy, void* dx, const char* op) {
  std::lock_guard lock(mutex_);
  constexpr int p = static_cast<int>(Pass::BackwardData);
  if (!chosen_[p]) {
    algo_[p] = search(spec_, BackwardDataCalls{*this, handle, w, dy, dx}, Pass::BackwardData, op);
    chosen_[p] = true;
    std::lock_guard c(counters_mutex);
    ++counters.algo_searches;
  }
  return algo_[p];
}

Algo Plan::backward_filter(cudnnHandle_t handle, const void* x, const void* dy, void* dw, const char* op) {
  std::lock_guard lock(mutex_);
  constexpr int p = static_cast<int>(Pass::BackwardFilter);
  if (!chosen_[p]) {
    algo_[p] = search(spec_, BackwardFilterCalls{*this, handle, x, dy, dw}, Pass::BackwardFilter, op);
    chosen_[p] = true;
    std::lock_guard c(counters_mutex);
    ++counters.algo_searches;
  }
  return algo_[p];
}

namespace {

// Any algorithm of cuDNN's heuristic ranking that reports success and is allowed by the math rules.
template <typename Calls>
bool any_supported(const PlanSpec& spec, const Calls& calls) {
  int max_count = 0;
  if (calls.max_count(&max_count) != CUDNN_STATUS_SUCCESS) return false;
  max_count = std::max(max_count, Calls::kAlgoCount);
  std::vector<typename Calls::Perf> perf(static_cast<size_t>(max_count));
  int returned = 0;
  if (calls.heuristic(max_count, &returned, perf.data()) != CUDNN_STATUS_SUCCESS) return false;
  for (int i = 0; i < returned; ++i) {
    cudnnMathType_t math;
    if (perf[i].status == CUDNN_STATUS_SUCCESS && allowed_math(spec, perf[i].mathType, &math)) return true;
  }
  return false;
}

}  // namespace

bool Plan::supports(cudnnHandle_t handle, Pass pass) {
  std::lock_guard lock(mutex_);
  const int p = static_cast<int>(pass);
  if (supported_[p] < 0) {
    bool ok = false;
    switch (pass) {
      case Pass::Forward: ok = any_supported(spec_, ForwardCalls{*this, handle, nullptr, nullptr, nullptr}); break;
      case Pass::BackwardData:
        ok = any_supported(spec_, BackwardDataCalls{*this, handle, nullptr, nullptr, nullptr});
        break;
      case Pass::BackwardFilter:
        ok = any_supported(spec_, BackwardFilterCalls{*this, handle, nullptr, nullptr, nullptr});
        break;
    }
    supported_[p] = ok ? 1 : 0;
  }
  return supported_[p] == 1;
}

namespace {

// The key of a PlanSpec: every field, flattened.
using Key = std::array<int64_t, 20>;

Key key_of(const PlanSpec& s) {
  const Geometry& g = s.g;
  return {static_cast<int64_t>(s.device.type()), s.device.index(), static_cast<int64_t>(s.dtype), s.nhwc, s.tf32,
          s.deterministic, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw, g.groups, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (int64_t v : k) {
      h ^= static_cast<uint64_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

struct PlanCache {
  std::mutex mutex;
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans;
};

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache;  // never destroyed: plans outlive static teardown
  return *cache;
}

}  // namespace

Plan& plan_for(const PlanSpec& spec) {
  PlanCache& c = plan_cache();
  const Key key = key_of(spec);
  std::lock_guard lock(c.mutex);
  auto it = c.plans.find(key);
  if (it == c.plans.end()) it = c.plans.emplace(key, std::make_unique<Plan>(spec)).first;
  return *it->second;
}

// ---- filters in cuDNN's layout --------------------------------------------------------------

namespace {

/// A channels-last copy of one weight, valid while its storage lives at this version, made
/// eagerly (capture 0) or by the capture of one graph (Note [Filters in captured graphs]).
struct CachedFilter {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  std::vector<int64_t> sizes;
  DType dtype = DType::Float32;
  Tensor copy;
  uint64_t capture = 0;
};

struct FilterKeyHash {
  size_t operator()(const std::pair<const Storage*, int64_t>& k) const {
    return std::hash<const void*>()(k.first) ^ (std::hash<int64_t>()(k.second) * 1099511628211ull);
  }
};

struct FilterCache {
  std::mutex mutex;
  std::unordered_map<std::pair<const Storage*, int64_t>, CachedFilter, FilterKeyHash> filters;
};

FilterCache& filter_cache() {
  static FilterCache* cache = new FilterCache;  // never destroyed, like the plans
  return *cache;
}

bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0; }

Elem elem_of(DType dt) { return dt == DType::Float32 ? Elem::F32 : Elem::F64; }

// OIHW (contiguous) → a new OHWI tensor (channels-last strides on the same logical sizes).
Tensor to_channels_last_filter(const Tensor& w, cudaStream_t stream) {
  const auto& s = w.sizes();
  Tensor out = empty_channels_last(s, w.dtype(), w.device());
  launch_transpose(elem_of(w.dtype()), w.raw_data(), out.raw_data(), s[0], s[1], s[2] * s[3], stream);
  QFLOW_CUDA_CHECK_LAUNCH("conv2d: filter to channels-last");
  return out;
}

}  // namespace

// Note [Filters in captured graphs]
// A graph replays the kernels its capture recorded, nothing else. Had a capture been served a
// cached filter, it would record no transpose, and every replay would read the filter of the
// moment before the capture: the optimizer step replayed after it updates the weight, never
// the copy (and the copy, eager memory, may be freed and reused while the graph still reads
// it). qflow-train's second epoch trained on frozen filters that way and its test accuracy fell
// to 10%: the first capture followed a warm-up step, whose update made the cache miss; the
// captures of later epochs (reset(), no warm-up) found the filters the evaluation had cached.
// So each entry remembers who made it: a capture is served only the copies it made itself
// (recorded transposes, shared by its forward and backward passes, refreshed by every replay),
// and eager code only eager copies (a captured copy holds nothing before the first replay, and
// a replay's writes bump the weight's version, Note [Versions of captured writes]).
Tensor filter_in_layout(const Tensor& weight, bool nhwc, cudaStream_t stream) {
  if (!nhwc) {
    if (weight.is_contiguous() && aligned16(weight)) return weight;
    Tensor out = empty(weight.sizes(), weight.dtype(), weight.device());
    copy_(out, weight);
    return out;
  }
  if (is_channels_last(weight) && aligned16(weight)) return weight;  // 1x1, depthwise, or stored so
  if (!weight.is_contiguous()) return to_channels_last_filter(contiguous(weight), stream);
  FilterCache& c = filter_cache();
  const std::shared_ptr<Storage>& storage = weight.impl()->storage();
  const uint64_t version = storage->version();
  const uint64_t capture = CachingAllocator::instance().capture_in_progress(weight.device());
  std::lock_guard lock(c.mutex);
  CachedFilter& e = c.filters[{storage.get(), weight.storage_offset()}];
  if (e.copy.defined() && e.storage.lock() == storage && e.version == version && e.sizes == weight.sizes() &&
      e.dtype == weight.dtype() && e.capture == capture) {
    std::lock_guard k(counters_mutex);
    ++counters.weight_reuses;
    return e.copy;
  }
  // Forget the copies of weights that died (their storage may come back at the same address).
  for (auto it = c.filters.begin(); it != c.filters.end();)
    it = it->second.storage.expired() && &it->second != &e ? c.filters.erase(it) : std::next(it);
  Tensor copy = to_channels_last_filter(weight, stream);
  e = CachedFilter{storage, version, weight.sizes(), weight.dtype(), copy, capture};
  std::lock_guard k(counters_mutex);
  ++counters.weight_copies;
  return copy;
}

CacheStats cache_stats() {
  CacheStats s;
  {
    std::lock_guard lock(plan_cache().mutex);
    s.plans = static_cast<int64_t>(plan_cache().plans.size());
  }
  std::lock_guard lock(counters_mutex);
  s.algo_searches = counters.algo_searches;
  s.weight_copies = counters.weight_copies;
  s.weight_reuses = counters.weight_reuses;
  return s;
}

void clear_cache() {
  {
    std::lock_guard lock(plan_cache().mutex);
    plan_cache().plans.clear();
  }
  std::lock_guard lock(filter_cache().mutex);
  filter_cache().filters.clear();
}

}  // namespace qflow::cuda::conv
