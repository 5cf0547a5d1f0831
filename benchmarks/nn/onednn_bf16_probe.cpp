// qflow-bench-onednn-bf16: oneDNN's bf16 convolutions (bf16 source and weights, float32 result)
// against its float32 direct and Winograd ones, per pass, on the CIFAR ResNet18 3x3 shapes at
// batch 128: whether bf16 compute pays on this CPU (issue 34, item 2). oneDNN directly, no
// qflow: it measures the library, before any of qflow's reorders or caches.
//
//   build/bin/qflow-bench-onednn-bf16            (OMP_NUM_THREADS sets the threads; ~30 s)
//
// Prints the median of 5 timed runs after 2 warm-up runs per kernel, in ms; -1 where oneDNN has
// no such kernel on this CPU (bf16 needs AVX512-BF16 or AMX, Winograd AVX-512).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>
#include <vector>

#include <dnnl.hpp>

namespace {

using namespace dnnl;
using dt = memory::data_type;
using tag = memory::format_tag;

engine& eng() {
  static engine e(engine::kind::cpu, 0);
  return e;
}
stream& strm() {
  static stream s(eng());
  return s;
}

double median_ms(const primitive& p, std::unordered_map<int, memory>& args) {
  for (int i = 0; i < 2; ++i) p.execute(strm(), args);
  strm().wait();
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    p.execute(strm(), args);
    strm().wait();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

memory mem(const memory::desc& d) { return memory(d, eng()); }

enum Variant { kF32Direct, kF32Winograd, kBf16Direct };
enum Pass { kForward, kBackwardData, kBackwardWeights };

// One pass of a 3x3 stride-1 padding-1 convolution (n, c, h, h) -> (n, o, h, h); -1 when oneDNN
// has no kernel for it here.
double time_pass(memory::dim n, memory::dim c, memory::dim h, memory::dim o, Variant v, Pass pass) {
  const memory::dims x{n, c, h, h}, w{o, c, 3, 3}, y{n, o, h, h}, st{1, 1}, pad{1, 1}, dil{0, 0};
  const dt in = v == kBf16Direct ? dt::bf16 : dt::f32;  // the result is float32 either way
  const algorithm al = v == kF32Winograd ? algorithm::convolution_winograd : algorithm::convolution_direct;
  try {
    const memory::desc xd(x, in, tag::any), wd(w, in, tag::any), yd(y, dt::f32, tag::any), gyd(y, in, tag::any);
    const convolution_forward::desc fd(prop_kind::forward_training, al, xd, wd, memory::desc(), yd, st, dil, pad, pad);
    const convolution_forward::primitive_desc fpd(fd, eng());
    if (pass == kForward) {
      std::unordered_map<int, memory> a{{DNNL_ARG_SRC, mem(fpd.src_desc())},
                                        {DNNL_ARG_WEIGHTS, mem(fpd.weights_desc())},
                                        {DNNL_ARG_DST, mem(fpd.dst_desc())}};
      return median_ms(convolution_forward(fpd), a);
    }
    if (pass == kBackwardData) {
      const convolution_backward_data::desc bd(al, memory::desc(x, dt::f32, tag::any), wd, gyd, st, dil, pad, pad);
      const convolution_backward_data::primitive_desc bpd(bd, eng(), fpd);
      std::unordered_map<int, memory> a{{DNNL_ARG_DIFF_DST, mem(bpd.diff_dst_desc())},
                                        {DNNL_ARG_WEIGHTS, mem(bpd.weights_desc())},
                                        {DNNL_ARG_DIFF_SRC, mem(bpd.diff_src_desc())}};
      return median_ms(convolution_backward_data(bpd), a);
    }
    const convolution_backward_weights::desc bd(al, xd, memory::desc(w, dt::f32, tag::any), gyd, st, dil, pad, pad);
    const convolution_backward_weights::primitive_desc bpd(bd, eng(), fpd);
    std::unordered_map<int, memory> a{{DNNL_ARG_SRC, mem(bpd.src_desc())},
                                      {DNNL_ARG_DIFF_DST, mem(bpd.diff_dst_desc())},
                                      {DNNL_ARG_DIFF_WEIGHTS, mem(bpd.diff_weights_desc())}};
    return median_ms(convolution_backward_weights(bpd), a);
  } catch (const dnnl::error&) {
    return -1;
  }
}

}  // namespace

int main() {
  struct Shape {
    memory::dim n, c, h, o;
  };
  const std::vector<Shape> shapes{{128, 64, 32, 64}, {128, 128, 16, 128}, {128, 256, 8, 256}, {128, 512, 4, 512}};
  std::printf("%-20s %-16s %10s %10s %10s\n", "shape (n,c,h->o)", "pass", "f32 direct", "f32 wino", "bf16 direct");
  double total[3] = {0, 0, 0}, best_f32 = 0;
  for (const Shape& sh : shapes) {
    for (Pass pass : {kForward, kBackwardData, kBackwardWeights}) {
      double ms[3];
      for (Variant v : {kF32Direct, kF32Winograd, kBf16Direct}) {
        ms[v] = time_pass(sh.n, sh.c, sh.h, sh.o, v, pass);
        total[v] += ms[v] > 0 ? ms[v] : 0;
      }
      best_f32 += ms[kF32Winograd] > 0 ? std::min(ms[kF32Direct], ms[kF32Winograd]) : ms[kF32Direct];
      char name[64];
      std::snprintf(name, sizeof name, "%ld,%ld,%ld->%ld", static_cast<long>(sh.n), static_cast<long>(sh.c),
                    static_cast<long>(sh.h), static_cast<long>(sh.o));
      std::printf("%-20s %-16s %10.2f %10.2f %10.2f\n", name,
                  pass == kForward ? "forward" : pass == kBackwardData ? "backward data" : "backward weights",
                  ms[kF32Direct], ms[kF32Winograd], ms[kBf16Direct]);
    }
  }
  std::printf("%-37s %10.2f %10.2f %10.2f\n", "total", total[kF32Direct], total[kF32Winograd], total[kBf16Direct]);
  std::printf("bf16 direct takes %.2fx the time of the faster float32 kernel per pass (%.2f ms)\n",
              total[kBf16Direct] / best_f32, best_f32);
  return 0;
}
