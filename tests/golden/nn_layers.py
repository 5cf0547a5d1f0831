#!/usr/bin/python3
"""Golden values for tests/nn/layers_test.cpp and tests/nn/training_golden_test.cpp.

Run with Debian's PyTorch (torch 1.13):

    /usr/bin/python3 tests/golden/nn_layers.py > tests/nn/nn_golden.inc

Every tensor is built from a formula the C++ tests reproduce bit for bit (see
tests/nn/golden_util.h):

    seq(shape, seed, scale)[i] = float32(scale * sin(0.37 * (i + 1) + seed))   (float64 math,
                                                                                row-major i)

and a module's k-th parameter (named_parameters order, 0-based) is seq(shape, 1 + k, 0.3).
Buffers keep their PyTorch defaults. Layers run in float32, like the C++ tests.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)  # a fixed summation order keeps the file reproducible


def seq(shape, seed, scale=1.0):
    n = math.prod(shape)
    vals = [scale * math.sin(0.37 * (i + 1) + seed) for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).to(torch.float32).reshape(shape)


def fill_params(module):
    with torch.no_grad():
        for k, (_, p) in enumerate(module.named_parameters()):
            p.copy_(seq(p.shape, 1.0 + k, 0.3))
    return module


def literal(v):
    s = "%.9g" % v
    if not any(c in s for c in ".en"):
        s += ".0"
    return s + "f"


OUT = []


def emit(name, t):
    t = t.detach()
    shape = ", ".join(str(d) for d in t.shape)
    body = ", ".join(literal(v) for v in t.reshape(-1).double().tolist())
    OUT.append(f"inline const Golden {name} = {{{{{shape}}}, {{{body}}}}};")


def emit_named(name, named):
    rows = []
    for key, t in named:
        t = t.detach()
        shape = ", ".join(str(d) for d in t.shape)
        body = ", ".join(literal(v) for v in t.reshape(-1).double().tolist())
        rows.append(f'  {{"{key}", {{{{{shape}}}, {{{body}}}}}}},')
    OUT.append(f"inline const std::vector<std::pair<std::string, Golden>> {name} = {{\n" + "\n".join(rows) + "\n};")


def section(title):
    OUT.append(f"\n// ---- {title}")


# ---- Conv2d -------------------------------------------------------------------------------------
# name, input shape, module
CONV_CASES = [
    ("conv_stride2_pad1", (2, 3, 7, 7), lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1)),
    ("conv_dilation2", (1, 2, 7, 7), lambda: nn.Conv2d(2, 3, 3, padding=2, dilation=2)),
    ("conv_groups2", (2, 4, 5, 5), lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2)),
    ("conv_depthwise", (2, 4, 6, 6), lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)),
    ("conv_depthwise_mult2_stride2", (1, 3, 7, 7), lambda: nn.Conv2d(3, 6, 3, stride=2, padding=1, groups=3)),
    ("conv_pointwise", (2, 4, 5, 5), lambda: nn.Conv2d(4, 5, 1)),
    ("conv_no_bias_rect", (1, 3, 6, 7), lambda: nn.Conv2d(3, 2, (2, 3), stride=(2, 1), padding=(1, 0), bias=False)),
    ("conv_same_odd", (2, 3, 6, 5), lambda: nn.Conv2d(3, 4, 3, padding="same")),
    ("conv_same_odd_dilated", (1, 2, 7, 6), lambda: nn.Conv2d(2, 3, 3, padding="same", dilation=2)),
    ("conv_same_even", (2, 2, 6, 5), lambda: nn.Conv2d(2, 3, 4, padding="same")),
    ("conv_same_even_rect", (1, 2, 6, 7), lambda: nn.Conv2d(2, 3, (2, 3), padding="same", bias=False)),
    ("conv_same_even_dilated", (1, 2, 7, 7), lambda: nn.Conv2d(2, 2, (4, 2), padding="same", dilation=(1, 3))),
    ("conv_valid", (1, 2, 5, 5), lambda: nn.Conv2d(2, 3, 3, padding="valid")),
]


def conv_goldens():
    section("Conv2d: input seq(shape, 0.5, 1)")
    for name, xs, make in CONV_CASES:
        torch.manual_seed(0)
        m = fill_params(make())
        emit(name, m(seq(xs, 0.5)))


# ---- BatchNorm ---------------------------------------------------------------------------------
def bn_two_steps(prefix, m, shape):
    """Two training steps on seq(shape, 0.5) and seq(shape, 1.5, 2) (+0.25), then eval."""
    fill_params(m)
    m.train()
    m(seq(shape, 0.5))
    y = m(seq(shape, 1.5, 2.0) + 0.25)
    emit(f"{prefix}_train", y)
    if m.track_running_stats:
        emit_named(f"{prefix}_buffers", [(k, b.float()) for k, b in m.named_buffers()])
    m.eval()
    emit(f"{prefix}_eval", m(seq(shape, 2.5, 1.5)))


def bn_goldens():
    section("BatchNorm: train steps on seq(s, 0.5, 1) and seq(s, 1.5, 2) + 0.25; eval on seq(s, 2.5, 1.5)")
    bn_two_steps("bn2d", nn.BatchNorm2d(3), (4, 3, 5, 4))
    bn_two_steps("bn2d_no_affine", nn.BatchNorm2d(3, affine=False), (4, 3, 5, 4))
    bn_two_steps("bn2d_momentum_none", nn.BatchNorm2d(3, momentum=None), (4, 3, 5, 4))
    bn_two_steps("bn2d_momentum_eps", nn.BatchNorm2d(3, eps=1e-3, momentum=0.3), (2, 3, 3, 3))
    bn_two_steps("bn2d_untracked", nn.BatchNorm2d(3, track_running_stats=False), (4, 3, 5, 4))
    bn_two_steps("bn1d_2d_input", nn.BatchNorm1d(5), (6, 5))
    bn_two_steps("bn1d_3d_input", nn.BatchNorm1d(3, momentum=None), (4, 3, 5))


# ---- Linear, pooling, activations, flatten -----------------------------------------------------
def misc_goldens():
    section("Linear: input seq(shape, 0.5, 1)")
    emit("linear_2d", fill_params(nn.Linear(5, 3))(seq((4, 5), 0.5)))
    emit("linear_3d", fill_params(nn.Linear(5, 3))(seq((2, 3, 5), 0.5)))
    emit("linear_no_bias", fill_params(nn.Linear(5, 4, bias=False))(seq((3, 5), 0.5)))

    section("Pooling: input seq(shape, 0.5, 1)")
    pools = [
        ("maxpool_k3_s2_p1", (2, 3, 7, 6), nn.MaxPool2d(3, stride=2, padding=1)),
        ("maxpool_k2_ceil", (1, 2, 7, 5), nn.MaxPool2d(2, ceil_mode=True)),
        ("maxpool_dilated", (1, 2, 8, 8), nn.MaxPool2d(3, stride=1, padding=1, dilation=2)),
        ("maxpool_rect", (1, 2, 7, 8), nn.MaxPool2d((3, 2), stride=(2, 3), padding=(1, 0))),
        ("avgpool_k3_s2_p1", (2, 3, 7, 6), nn.AvgPool2d(3, stride=2, padding=1)),
        ("avgpool_no_count_pad", (2, 3, 7, 6), nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)),
        ("avgpool_ceil", (1, 2, 7, 5), nn.AvgPool2d(2, ceil_mode=True)),
        ("avgpool_ceil_pad", (1, 2, 6, 7), nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)),
        ("avgpool_ceil_pad_no_count", (1, 2, 6, 7),
         nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
        ("adaptive_avg_3x2", (2, 3, 7, 5), nn.AdaptiveAvgPool2d((3, 2))),
        ("adaptive_avg_1", (2, 3, 5, 4), nn.AdaptiveAvgPool2d(1)),
        ("adaptive_avg_upsample", (1, 2, 3, 2), nn.AdaptiveAvgPool2d((4, 5))),
    ]
    for name, xs, m in pools:
        emit(name, m(seq(xs, 0.5)))

    section("Activations: input seq((3, 4, 5), 0.5, 8)")
    x = seq((3, 4, 5), 0.5, 8.0)
    for name, m in [("relu", nn.ReLU()), ("relu6", nn.ReLU6()), ("hardswish", nn.Hardswish()),
                    ("sigmoid", nn.Sigmoid()), ("tanh", nn.Tanh())]:
        emit(name, m(x))

    section("Flatten: input seq((2, 3, 4, 5), 0.5, 1)")
    emit("flatten_default", nn.Flatten()(seq((2, 3, 4, 5), 0.5)))
    emit("flatten_1_2", nn.Flatten(1, 2)(seq((2, 3, 4, 5), 0.5)))


# ---- Sequential --------------------------------------------------------------------------------
def small_net():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64, 3))


def sequential_goldens():
    section("Sequential(conv, bn, relu, maxpool, flatten, linear): input seq((2, 3, 8, 8), 0.5, 1)")
    net = fill_params(small_net())
    x = seq((2, 3, 8, 8), 0.5)
    emit("sequential_train", net(x))
    net.eval()
    emit("sequential_eval", net(x))


# ---- repr --------------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
            nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16), nn.Hardswish(),
            nn.Conv2d(16, 8, (1, 3), padding="same", dilation=(1, 2)), nn.Conv2d(8, 8, 1, padding="valid"),
            nn.MaxPool2d(3, stride=2, padding=1), nn.MaxPool2d((2, 2), ceil_mode=True),
            nn.AvgPool2d(3, stride=1, padding=1), nn.AvgPool2d((2, 1)),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2))
        self.head = nn.ModuleList([nn.Linear(8, 4), nn.Linear(4, 2, bias=False)])
        self.norm = nn.BatchNorm1d(4, eps=1e-3, momentum=None, affine=False)
        self.gates = nn.Sequential(nn.Sigmoid(), nn.Tanh(), nn.ReLU(), nn.Identity(), nn.Flatten(0, 2))
        self.pool = nn.AdaptiveAvgPool2d((2, 3))


def repr_golden():
    section("repr of the Net in tests/nn/layers_test.cpp (ReprTest)")
    text = repr(Net())
    OUT.append(f'inline const char* const kNetRepr = R"({text})";')


# ---- training ----------------------------------------------------------------------------------
def train(make_opt):
    net = fill_params(small_net())
    opt = make_opt(net.parameters())
    x = seq((4, 3, 8, 8), 0.5)
    y = torch.tensor([0, 2, 1, 2])
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = [(k, v.float()) for k, v in net.state_dict().items()]
    return state, torch.tensor(losses)


def training_goldens():
    section("5 training steps of the Sequential above on seq((4, 3, 8, 8), 0.5, 1), labels {0, 2, 1, 2}")
    state, losses = train(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4))
    emit_named("train_sgd_state", state)
    emit("train_sgd_losses", losses)
    state, losses = train(lambda p: torch.optim.Adam(p, lr=1e-2))
    emit_named("train_adam_state", state)
    emit("train_adam_losses", losses)


def main():
    conv_goldens()
    bn_goldens()
    misc_goldens()
    sequential_goldens()
    repr_golden()
    training_goldens()
    print("// Generated by tests/golden/nn_layers.py with PyTorch " + torch.__version__ + ". Do not edit.")
    print("// Inputs and parameters follow the formulas documented there (and in golden_util.h).")
    print("#pragma once")
    print("#include <string>\n#include <utility>\n#include <vector>\n")
    print("#include \"nn/golden_util.h\"\n")
    print("namespace nn_golden {")
    print("\n".join(OUT))
    print("\n}  // namespace nn_golden")


if __name__ == "__main__":
    main()
