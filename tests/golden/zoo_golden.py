"""Writes weights, an input and PyTorch's eval/train outputs for a zoo model.

usage: /usr/bin/python3 zoo_golden.py {resnet18|lenet5} OUT_DIR
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
after = {"after." + k: v for k, v in model.state_dict().items()}
safetensors_io.save({"input": x, "out_eval": out_eval, "out_train": out_train, **after}, os.path.join(out, "io.safetensors"))
