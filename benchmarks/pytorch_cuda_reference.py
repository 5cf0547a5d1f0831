#!/usr/bin/env python3
"""PyTorch side of `benchmarks/compare --device cuda`: float training and inference of the CIFAR
ResNet18 (tests/golden/zoo_models.py, the kuangliu layout qflow's zoo mirrors) on a CUDA GPU,
timed like `qflow-bench-e2e --device cuda`. One JSON line per workload and batch.

    python3 benchmarks/pytorch_cuda_reference.py --variant nchw --train-batch 128 --train-batch 512 \
        --infer-batch 1 --infer-batch 128

Variants (what a PyTorch user would switch on for speed; compare takes the best):
  nchw     float32 in NCHW; convolutions in TF32 (PyTorch's default torch.backends.cudnn.allow_tf32)
  cl       float32 with model and input in torch.channels_last
  cl-bf16  channels_last under torch.autocast("cuda", dtype=torch.bfloat16)

QAT (--qat-batch): the same training step on the FX QAT model a PyTorch user makes —
prepare_qat_fx with the x86 default QAT qconfig mapping (fused ConvBn(ReLU)2d, fused observer +
fake-quantize modules), moved to the GPU — in nchw and cl; under bf16 autocast PyTorch's FX QAT
fails ("expected scalar type BFloat16 but found Float", issue 34), so cl-bf16 skips it, saying so.

The data is synthetic and already on the GPU (no loader in the timing). Training: SGD with
momentum 0.9 and weight decay 5e-4, zero_grad + forward + cross_entropy + backward + step.
Inference: eval, torch.inference_mode. cudnn.benchmark is on (the autotuner picks each
convolution's algorithm during the warm-up; --no-cudnn-benchmark turns it off). Every timed run
starts and ends with torch.cuda.synchronize(); the figure is the median of the timed runs.
peak_device_mb is torch.cuda.max_memory_allocated over the timed runs (reset after the
warm-up, so it counts the model, the optimizer state and the step's activations).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
from zoo_models import ResNet  # noqa: E402

VARIANTS = ("nchw", "cl", "cl-bf16")


def resnet18():
    torch.manual_seed(0)
    return ResNet([2, 2, 2, 2], num_classes=10, in_channels=3)


class Run:
    def __init__(self, args):
        self.args = args
        self.device = torch.device(args.device)
        self.channels_last = args.variant in ("cl", "cl-bf16")
        self.bf16 = args.variant == "cl-bf16"
        self.cuda = self.device.type == "cuda"  # --device cpu: a smoke test of this script without a GPU

    def synchronize(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def layout(self, x):
        return x.to(memory_format=torch.channels_last) if self.channels_last else x

    def autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def measure(self, fn):
        for _ in range(self.args.warmup):
            fn()
        self.synchronize()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        times = []
        for _ in range(self.args.repetitions):
            start = time.perf_counter()
            fn()
            self.synchronize()
            times.append(time.perf_counter() - start)
        return times, torch.cuda.max_memory_allocated(self.device) / 2**20 if self.cuda else 0.0

    def report(self, workload, times, peak_mb, images, latency):
        values = sorted(t * 1e3 if latency else images / t for t in times)
        print(json.dumps({
            "framework": "pytorch", "workload": workload, "unit": "ms" if latency else "images/s",
            "median": round(statistics.median(values), 4), "min": round(values[0], 4), "max": round(values[-1], 4),
            "repetitions": len(times), "peak_device_mb": round(peak_mb, 1), "variant": self.args.variant,
            "device": str(self.device), "device_name": torch.cuda.get_device_name(self.device) if self.cuda else "cpu",
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
        }), flush=True)

    def train(self, batch):
        model = self.layout(resnet18().to(self.device).train())
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        images = self.layout(torch.randn(batch, 3, 32, 32, device=self.device))
        labels = torch.randint(0, 10, (batch,), device=self.device)

        def step():
            opt.zero_grad(set_to_none=True)
            with self.autocast():
                loss = F.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
        times, peak = self.measure(step)
        self.report(f"train_resnet18_b{batch}", times, peak, batch, False)
        del model, opt, images, labels

    def qat(self, batch):
        if self.bf16:
            print(f"pytorch_cuda_reference: qat_resnet18_b{batch} skipped under {self.args.variant}: PyTorch's FX QAT "
                  "does not run under bf16 autocast", file=sys.stderr)
            return
        from torch.ao.quantization import get_default_qat_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_qat_fx
        example = torch.randn(1, 3, 32, 32)
        try:
            mapping = get_default_qat_qconfig_mapping("x86")
        except (AssertionError, ValueError, RuntimeError):  # a PyTorch before the x86 backend
            mapping = get_default_qat_qconfig_mapping("fbgemm")
        model = prepare_qat_fx(resnet18().train(), mapping, (example,))
        model = self.layout(model.to(self.device).train())
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        images = self.layout(torch.randn(batch, 3, 32, 32, device=self.device))
        labels = torch.randint(0, 10, (batch,), device=self.device)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(images), labels).backward()
            opt.step()
        times, peak = self.measure(step)
        self.report(f"qat_resnet18_b{batch}", times, peak, batch, False)
        del model, opt, images, labels

    def infer(self, batch):
        model = self.layout(resnet18().to(self.device).eval())
        images = self.layout(torch.randn(batch, 3, 32, 32, device=self.device))

        def forward():
            with torch.inference_mode(), self.autocast():
                model(images)
        times, peak = self.measure(forward)
        self.report(f"infer_resnet18_b{batch}", times, peak, batch, batch == 1)
        del model, images


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="nchw")
    parser.add_argument("--train-batch", type=int, action="append", help="training batch sizes (repeatable)")
    parser.add_argument("--infer-batch", type=int, action="append", help="inference batch sizes (repeatable)")
    parser.add_argument("--qat-batch", type=int, action="append", help="QAT training batch sizes (repeatable; default none)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-cudnn-benchmark", action="store_true", help="leave cuDNN's autotuner off")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"pytorch_cuda_reference: this PyTorch ({torch.__version__}) sees no CUDA GPU")
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    run = Run(args)
    # A batch of 0 stands for none (--train-batch 0: inference only).
    for b in [b for b in (args.train_batch if args.train_batch is not None else [128, 512]) if b > 0]:
        run.train(b)
        if run.cuda:
            torch.cuda.empty_cache()
    for b in [b for b in (args.qat_batch or []) if b > 0]:
        run.qat(b)
        if run.cuda:
            torch.cuda.empty_cache()
    for b in [b for b in (args.infer_batch if args.infer_batch is not None else [1, 128]) if b > 0]:
        run.infer(b)
        if run.cuda:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
