#!/usr/bin/python3
"""PyTorch side of qflow-bench-e2e: the same workloads on the same CIFAR ResNet18 definition
(tests/golden/zoo_models.py, which qflow's zoo mirrors), same thread count, same timing rule
(warm-up runs, then the median of timed runs). One JSON line per workload.

    /usr/bin/python3 benchmarks/pytorch_reference.py --workload train --batch 128 --threads 2
    /usr/bin/python3 benchmarks/pytorch_reference.py --workload train --channels-last

--channels-last runs the model and its input in torch.channels_last (NHWC), the layout PyTorch
users switch on for CPU speed; each JSON line names its "layout". --bf16 runs the train and
infer workloads under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's CPU mixed
precision (its "layout" gains "-bf16").

Workloads: train (SGD step: forward + cross_entropy + backward + step), qat (the same step on
the FX QAT model from torch.ao.quantization.quantize_fx.prepare_qat_fx), infer (eval, no grad),
deploy (the int8 model a PyTorch user deploys: prepare_qat_fx with the onednn QAT qconfig
mapping, one calibration batch, convert_fx, eval, no grad; its quantized convolutions run on
the onednn quantized engine, which this PyTorch build has (it has no fbgemm), in NHWC
internally whatever the input layout, so --channels-last only changes the input's layout),
deploy-fakequant (the old deploy: the fbgemm QAT model after one calibration batch, observers
off and BN frozen, eval, no grad: fake-quantized float inference; deploy-fakequant_resnet18_b*).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
from zoo_models import ResNet  # noqa: E402


def resnet18():
    torch.manual_seed(0)
    return ResNet([2, 2, 2, 2], num_classes=10, in_channels=3)


def forward_gflop_per_image():
    """Convolution and linear FLOPs (2 per multiply-add) of one 32x32 forward pass."""
    flops = []

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            flops.append(2 * output.numel() * k)
        elif isinstance(module, torch.nn.Linear):
            flops.append(2 * output.numel() * module.in_features)
    model = resnet18().eval()
    for m in model.modules():
        m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.randn(1, 3, 32, 32))
    return sum(flops) * 1e-9


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def report(workload, seconds, images, latency, args):
    seconds = sorted(seconds)
    value = (lambda s: s * 1e3) if latency else (lambda s: images / s)
    values = [value(s) for s in seconds]
    print(json.dumps({
        "framework": "pytorch", "workload": workload, "unit": "ms" if latency else "images/s",
        "median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4),
        "repetitions": len(seconds), "peak_rss_mb": round(peak_rss_mb(), 1), "threads": torch.get_num_threads(),
        "layout": ("channels_last" if args.channels_last else "nchw") + ("-bf16" if args.bf16 else ""),
    }), flush=True)


def in_layout(x, args):
    """A model or an input batch in the layout the run asks for."""
    return x.to(memory_format=torch.channels_last) if args.channels_last else x


def measure(fn, args):
    for _ in range(args.warmup):
        fn()
    times = []
    for _ in range(args.repetitions):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def qat_model(batch, backend="fbgemm"):
    from torch.ao.quantization import get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import prepare_qat_fx
    model = resnet18().train()
    return prepare_qat_fx(model, get_default_qat_qconfig_mapping(backend), (torch.randn(batch, 3, 32, 32),))


def calibrated_qat_model(backend):
    model = qat_model(8, backend)
    model(torch.randn(8, 3, 32, 32))  # one calibration batch, as qflow-bench-e2e's deploy workload
    return model


def fakequant_deploy_model():
    model = calibrated_qat_model("fbgemm")
    model.apply(torch.ao.quantization.disable_observer)
    model.apply(torch.nn.intrinsic.qat.freeze_bn_stats)
    return model.eval()


def int8_deploy_model():
    """convert_fx of the calibrated onednn QAT model: quantized int8 modules (QuantizedConvReLU2d, ...).
    PyTorch 1.13 has no onednn BackendConfig; convert_fx's default (native) one serves fbgemm and onednn."""
    from torch.ao.quantization.quantize_fx import convert_fx
    torch.backends.quantized.engine = "onednn"
    return convert_fx(calibrated_qat_model("onednn")).eval()


def autocast(args):
    """bf16 autocast on the CPU with --bf16, else nothing."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)


def train_step(model, batch, args, name):
    model = in_layout(model, args)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    images = in_layout(torch.randn(batch, 3, 32, 32), args)
    labels = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        with autocast(args):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
    report(f"{name}_resnet18_b{batch}", measure(step, args), batch, False, args)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="all",
                        choices=["train", "qat", "infer", "deploy", "deploy-fakequant", "flops", "all"])
    parser.add_argument("--batch", type=int, action="append", help="batch sizes (repeatable)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--channels-last", action="store_true", help="model and input in torch.channels_last")
    parser.add_argument("--bf16", action="store_true", help="train and infer under CPU bf16 autocast")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.workload in ("flops", "all"):
        print(json.dumps({"framework": "pytorch", "workload": "flops_resnet18", "unit": "GFLOP/image",
                          "median": round(forward_gflop_per_image(), 6)}), flush=True)
    if args.workload in ("train", "all"):
        for b in args.batch or [32, 128]:
            train_step(resnet18().train(), b, args, "train")
    if args.workload in ("qat", "all"):
        for b in args.batch or [128]:
            train_step(qat_model(b), b, args, "qat")
    if args.workload in ("infer", "all"):
        for b in args.batch or [1, 128]:
            model = in_layout(resnet18().eval(), args)
            images = in_layout(torch.randn(b, 3, 32, 32), args)
            with torch.no_grad(), autocast(args):
                report(f"infer_resnet18_b{b}", measure(lambda: model(images), args), b, b == 1, args)
    if args.workload in ("deploy", "deploy-fakequant", "all"):
        fakequant = args.workload == "deploy-fakequant"
        for b in args.batch or [1, 128]:
            # The int8 model's packed weights have no layout to change: only its input follows the run's.
            model = in_layout(fakequant_deploy_model(), args) if fakequant else int8_deploy_model()
            images = in_layout(torch.randn(b, 3, 32, 32), args)
            with torch.no_grad():
                report(f"{'deploy-fakequant' if fakequant else 'deploy'}_resnet18_b{b}",
                       measure(lambda: model(images), args), b, b == 1, args)


if __name__ == "__main__":
    main()
