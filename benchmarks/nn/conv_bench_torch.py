#!/usr/bin/python3
"""PyTorch reference for qflow-bench-conv: conv2d forward/backward GFLOP/s on the CIFAR
ResNet18 conv shapes, same batch, same thread count, same FLOP convention (backward = grad
input + grad weight = 2x forward).

    /usr/bin/python3 benchmarks/nn/conv_bench_torch.py [--batch=16] [--threads=N]
"""
import argparse
import os
import time

import torch

SHAPES = [  # name, in, out, kernel, stride, input size
    ("stem_3-64_3x3_s1_32", 3, 64, 3, 1, 32),
    ("layer1_64-64_3x3_s1_32", 64, 64, 3, 1, 32),
    ("layer2_64-128_3x3_s2_32", 64, 128, 3, 2, 32),
    ("layer2_128-128_3x3_s1_16", 128, 128, 3, 1, 16),
    ("layer2_64-128_1x1_s2_32", 64, 128, 1, 2, 32),
    ("layer3_128-256_3x3_s2_16", 128, 256, 3, 2, 16),
    ("layer3_256-256_3x3_s1_8", 256, 256, 3, 1, 8),
    ("layer3_128-256_1x1_s2_16", 128, 256, 1, 2, 16),
    ("layer4_256-512_3x3_s2_8", 256, 512, 3, 2, 8),
    ("layer4_512-512_3x3_s1_4", 512, 512, 3, 1, 4),
    ("layer4_256-512_1x1_s2_8", 256, 512, 1, 2, 8),
]


def timeit(fn, min_time=0.2):
    fn()  # warm-up
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} conv2d, batch {args.batch}, {torch.get_num_threads()} threads (GFLOP/s)")
    print(f"{'shape':<28} {'forward':>9} {'backward':>9}")
    for name, cin, cout, k, s, size in SHAPES:
        pad = k // 2
        out = (size + 2 * pad - k) // s + 1
        flops = 2.0 * args.batch * cout * out * out * cin * k * k
        x = torch.randn(args.batch, cin, size, size, requires_grad=True)
        w = torch.randn(cout, cin, k, k, requires_grad=True)
        with torch.no_grad():
            fwd = timeit(lambda: torch.nn.functional.conv2d(x, w, None, s, pad))
        y = torch.nn.functional.conv2d(x, w, None, s, pad)
        gy = torch.randn_like(y)
        bwd = timeit(lambda: torch.autograd.grad(y, (x, w), gy, retain_graph=True))
        print(f"{name:<28} {flops / fwd * 1e-9:>9.1f} {2 * flops / bwd * 1e-9:>9.1f}")


if __name__ == "__main__":
    main()
