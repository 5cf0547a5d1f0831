"""Writes weights, an input and PyTorch's eval/train outputs for a zoo model.

usage: /usr/bin/python3 zoo_golden.py {resnet18|resnet18_gray28|lenet5} OUT_DIR

Then one more training-mode forward with grad, in float64: the mean cross-entropy against
`labels` and every parameter's gradient ("grad." + name), so the whole backward pass is checked
too. float64 because with a batch of 3 the backward through twenty BatchNorms is ill-conditioned:
float32 gradients of the first layers differ from the exact ones by ~0.3 % of their largest entry
in PyTorch itself, which would hide a real error of that size.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
import zoo_models  # noqa: E402

name, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if name == "resnet18":
    model, x = zoo_models.ResNet([2, 2, 2, 2], num_classes=10, in_channels=3), torch.randn(3, 3, 32, 32)
elif name == "resnet18_gray28":  # Fashion-MNIST's shape: odd feature maps (28, 14, 7, 4)
    model, x = zoo_models.ResNet([2, 2, 2, 2], num_classes=10, in_channels=1), torch.randn(3, 1, 28, 28)
else:
    model, x = zoo_models.LeNet5(num_classes=10, in_channels=1, image_size=28), torch.randn(3, 1, 28, 28)
with torch.no_grad():  # non-trivial running statistics so eval mode is a real test
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.2, 0.2)
safetensors_io.save(model.state_dict(), os.path.join(out, "weights.safetensors"))
model.eval()
with torch.no_grad():
    out_eval = model(x)
model.train()
with torch.no_grad():
    out_train = model(x)
after = {"after." + k: v.clone() for k, v in model.state_dict().items()}
labels = torch.arange(x.shape[0]) % 10
model.double()
loss = torch.nn.functional.cross_entropy(model(x.double()), labels)
loss.backward()
grads = {"grad." + k: p.grad for k, p in model.named_parameters()}
safetensors_io.save({"input": x, "out_eval": out_eval, "out_train": out_train, "labels": labels, "loss": loss.detach(),
                     **after, **grads}, os.path.join(out, "io.safetensors"))
