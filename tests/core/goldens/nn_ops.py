# Golden values for tests/core/{norm,activation,loss}_test.cpp, from PyTorch 1.13:
#   /usr/bin/python3 tests/core/goldens/nn_ops.py
# Inputs are seq(shape, seed, scale)[i] = sin(0.37 i + seed) * scale (float32 unless noted),
# rebuilt the same way by the C++ tests.
import math
import torch
import torch.nn.functional as F


def seq(shape, seed, scale=1.0, dtype=torch.float32):
    n = math.prod(shape)
    v = [math.sin(0.37 * i + seed) * scale for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape).to(dtype)


def show(name, t, digits=9):
    vals = ", ".join(("%." + str(digits) + "g") % v for v in t.detach().flatten().tolist())
    print(f"// {name}: shape {list(t.shape)}\n{{{vals}}}")


print("// ---- batch norm ----")
x = seq([4, 3], 0.5, 2.0)
w = torch.tensor([1.5, -0.5, 2.0]); b = torch.tensor([0.1, 0.2, -0.3])
rm = torch.tensor([0.5, -1.0, 0.0]); rv = torch.tensor([1.0, 2.0, 0.5])
show("bn2d train y", F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5))
show("bn2d running_mean", rm); show("bn2d running_var", rv)

x4 = seq([2, 3, 2, 2], 1.0, 3.0) - 1.0
w4 = torch.tensor([0.7, 1.2, -1.1]); b4 = torch.tensor([0.0, 0.5, 1.0])
rm4 = torch.zeros(3); rv4 = torch.ones(3)
show("bn4d train y (momentum 0.3, eps 1e-3)", F.batch_norm(x4, rm4, rv4, w4, b4, training=True, momentum=0.3, eps=1e-3))
show("bn4d running_mean", rm4); show("bn4d running_var", rv4)
show("bn4d eval y (after the update)", F.batch_norm(x4, rm4, rv4, w4, b4, training=False, eps=1e-3))

x3 = seq([3, 2, 4], 2.0)
show("bn3d train y, no affine, no running stats", F.batch_norm(x3, None, None, None, None, training=True))
_, m, inv = torch.native_batch_norm(x4, w4, b4, None, None, True, 0.1, 1e-3)
show("native_batch_norm mean", m); show("native_batch_norm invstd", inv)

print("// ---- activations ----")
xa = seq([12], 0.3, 5.0)
show("relu6", F.relu6(xa)); show("hardswish", F.hardswish(xa))
show("hardtanh(-2, 1.5)", F.hardtanh(xa, -2.0, 1.5)); show("leaky_relu(0.2)", F.leaky_relu(xa, 0.2))

print("// ---- softmax ----")
xs = seq([2, 3, 4], 0.1, 3.0)
for d in (0, 1, 2):
    show(f"softmax dim {d}", F.softmax(xs, d)); show(f"log_softmax dim {d}", F.log_softmax(xs, d))
# Large logits: rows around +1e4 and -1e4 with O(1) gaps, and one row spread over [-1e4, 1e4].
# The float32 input is exact in float64, so the float64 result is the true answer.
big = seq([3, 5], 0.7, 3.0)
big[0] += 1e4; big[1] -= 1e4; big[2] = torch.tensor([1e4, -1e4, 0.0, 5e3, -5e3])
show("big logits softmax (float64 of the float32 input)", F.softmax(big.double(), 1), 12)
show("big logits log_softmax (float64 of the float32 input)", F.log_softmax(big.double(), 1), 12)

print("// ---- losses ----")
logits = seq([4, 5], 0.2, 2.0)
target = torch.tensor([1, 4, 0, 3])
cw = torch.tensor([0.5, 1.0, 2.0, 1.5, 0.25])
t_ign = torch.tensor([1, -100, 0, 3])
for red in ("none", "mean", "sum"):
    show(f"ce {red}", F.cross_entropy(logits, target, reduction=red))
    show(f"ce weight+ignore+smoothing 0.1 {red}",
         F.cross_entropy(logits, t_ign, weight=cw, ignore_index=-100, reduction=red, label_smoothing=0.1))
show("ce smoothing 0.2 mean", F.cross_entropy(logits, target, label_smoothing=0.2))
show("ce weight mean", F.cross_entropy(logits, target, weight=cw))
show("ce ignore_index=3 mean", F.cross_entropy(logits, target, ignore_index=3))
l3 = seq([2, 3, 4], 0.9, 1.5)
t3 = torch.tensor([[0, 2, 1, -1], [1, 1, 0, 2]])
show("ce 3d ignore=-1 smoothing 0.3 mean", F.cross_entropy(l3, t3, ignore_index=-1, label_smoothing=0.3))
show("ce 3d ignore=-1 none", F.cross_entropy(l3, t3, ignore_index=-1, reduction="none"))
show("ce unbatched", F.cross_entropy(seq([5], 0.4), torch.tensor(2)))
lp = F.log_softmax(logits, 1)
for red in ("none", "mean", "sum"):
    show(f"nll weight+ignore {red}", F.nll_loss(lp, t_ign, weight=cw, reduction=red))
p = seq([3, 4], 0.0); q = seq([3, 4], 1.3, 0.5)
for red in ("none", "mean", "sum"):
    show(f"mse {red}", F.mse_loss(p, q, reduction=red)); show(f"l1 {red}", F.l1_loss(p, q, reduction=red))
