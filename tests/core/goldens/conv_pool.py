#!/usr/bin/python3
"""Golden values for tests/core/conv_test.cpp, pool_test.cpp and tests/autograd/conv_grad_test.cpp.

Run with Debian's PyTorch (/usr/bin/python3, torch 1.13) and paste the printed vectors.
Inputs are seq(shape, seed)[i] = sin(0.37 * i + seed) * scale in row-major order, cast to the
test's dtype; the C++ tests build the same tensors with the same formula.
"""
import math
import sys

import torch


def seq(shape, seed, scale=1.0, dtype=torch.float32):
    n = math.prod(shape)
    vals = [math.sin(0.37 * i + seed) * scale for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).to(dtype).reshape(shape)


def show(name, t):
    flat = t.detach().reshape(-1).tolist()
    if t.dtype in (torch.int64,):
        body = ", ".join(str(v) for v in flat)
    else:
        body = ", ".join(f"{v:.9g}" for v in flat)
    print(f"  // {name}: shape {list(t.shape)}")
    print(f"  {{{body}}},")


F = torch.nn.functional

CONV_CASES = [
    # name, x shape, w shape, bias, stride, padding, dilation, groups
    ("Basic", (2, 3, 5, 5), (4, 3, 3, 3), True, 1, 0, 1, 1),
    ("Stride2Pad1", (1, 2, 7, 6), (3, 2, 3, 3), True, 2, 1, 1, 1),
    ("Dilation2", (1, 2, 7, 7), (2, 2, 3, 3), False, 1, 2, 2, 1),
    ("Groups2", (1, 4, 5, 5), (6, 2, 3, 3), True, 1, 1, 1, 2),
    ("Depthwise", (2, 3, 5, 5), (6, 1, 3, 3), False, 2, 1, 1, 3),
    ("Pointwise", (1, 4, 3, 3), (5, 4, 1, 1), True, 1, 0, 1, 1),
    ("PointwiseBatched", (2, 4, 3, 3), (5, 4, 1, 1), False, 1, 0, 1, 1),
    ("PointwiseStride2", (2, 3, 5, 5), (2, 3, 1, 1), False, 2, 0, 1, 1),
    ("Rectangular", (1, 3, 6, 7), (2, 3, 2, 3), True, (2, 1), (1, 0), (1, 2), 1),
]


def conv_goldens():
    print("// ---- conv2d forward")
    for name, xs, ws, has_b, s, p, d, g in CONV_CASES:
        x = seq(xs, 0.1)
        w = seq(ws, 0.7, 0.5)
        b = seq((ws[0],), 1.3, 0.5) if has_b else None
        y = F.conv2d(x.double(), w.double(), b.double() if b is not None else None, s, p, d, g)
        show(name, y)


def conv_backward_golden():
    # Mid-size case: gradients of sum(y * seq) for each input.
    print("// ---- conv2d backward (mid-size)")
    x = seq((4, 8, 12, 12), 0.2).double().requires_grad_()
    w = seq((16, 4, 3, 3), 0.5, 0.3).double().requires_grad_()
    b = seq((16,), 0.9, 0.3).double().requires_grad_()
    y = F.conv2d(x, w, b, 2, 1, 1, 2)
    gy = seq(tuple(y.shape), 1.7)
    y.backward(gy)
    print(f"  // y shape {list(y.shape)} sum {y.sum().item():.12g} abs-sum {y.abs().sum().item():.12g}")
    for n, t in (("gx", x.grad), ("gw", w.grad)):
        print(f"  // {n} sum {t.sum().item():.12g} abs-sum {t.abs().sum().item():.12g} sq-sum {(t * t).sum().item():.12g}")
    show("gb", b.grad)
    show("gw[0, 0]", w.grad[0, 0])
    show("gx[1, 3, 0:3, 0:3]", x.grad[1, 3, 0:3, 0:3])


def pool_goldens():
    print("// ---- pooling")
    x = seq((1, 2, 7, 7), 0.3)
    show("MaxK3S2P1", F.max_pool2d(x, 3, 2, 1))
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    show("MaxK3S2P1 indices", idx)
    show("MaxK2", F.max_pool2d(x, 2))
    show("MaxCeil", F.max_pool2d(seq((1, 1, 6, 6), 0.4), 3, 2, 0, ceil_mode=True))
    show("MaxDilation2", F.max_pool2d(x, 2, 1, 0, 2))
    show("AvgK3S2P1Include", F.avg_pool2d(x, 3, 2, 1))
    show("AvgK3S2P1Exclude", F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))
    xc = seq((1, 1, 6, 6), 0.4)
    show("AvgCeilPad", F.avg_pool2d(xc, 3, 2, 1, ceil_mode=True))
    show("AvgCeilPadExclude", F.avg_pool2d(xc, 3, 2, 1, ceil_mode=True, count_include_pad=False))
    show("AvgDivisor", F.avg_pool2d(x, 2, divisor_override=3))
    xa = seq((2, 2, 5, 7), 0.6)
    show("Adaptive3x4", F.adaptive_avg_pool2d(xa, (3, 4)))
    show("AdaptiveUp", F.adaptive_avg_pool2d(seq((1, 1, 2, 3), 0.6), (3, 4)))
    print("// ---- pooling backward (grad_output = seq(out shape, 1.1))")
    for name, fn in (
        ("MaxBackward", lambda t: F.max_pool2d(t, 3, 2, 1)),
        ("AvgBackward", lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
        ("AdaptiveBackward", lambda t: F.adaptive_avg_pool2d(t, (3, 4))),
    ):
        t = seq((1, 1, 6, 7), 0.2).double().requires_grad_()
        out = fn(t)
        out.backward(seq(tuple(out.shape), 1.1).double())
        show(name, t.grad)


if __name__ == "__main__":
    torch.set_printoptions(precision=10)
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("conv", "all"):
        conv_goldens()
        conv_backward_golden()
    if what in ("pool", "all"):
        pool_goldens()
