"""The time estimate printed before a long study: a short warm-up of qflow-train on the real
data, then arithmetic.

Warm-up: for the float model and for one QAT configuration, qflow-train with the study's own
flags and processes, on the first WARMUP_STEPS global batches of the training set and as many
test images, for 2 of 3 epochs (--stop-after 2). Epoch 1 pays the one-off costs (oneDNN's
kernel generation, first allocations); epoch 2's images/s (log.csv) is the steady training
speed. Evaluation's speed comes from the rest of the process's wall time (2 evaluations, plus
start-up and checkpoint saves, so it errs slow: the estimate errs long). The five QAT
configurations cost the same per step (they differ in a scale formula), so one stands for all.

Cluster projection, for M machines each as fast as the one measured (N processes on it), the
global batch 128 split over them, gradients averaged by a ring allreduce:
    step(M) = 128 / (R · M) + 2 (M − 1) / M · B / W
R = measured images/s, B = gradient bytes (the checkpoint's momentum buffers: one per
parameter), W = network bandwidth (--network-gbps). It assumes no overlap of communication
with backward (pessimistic) and per-image speed unchanged at the smaller per-machine batch
(optimistic for large M)."""
import json
import math
import os
import shutil
import struct
import subprocess
import time

from . import launch
from .runs import read_csv

CIFAR_TRAIN, CIFAR_TEST = 50000, 10000
# Global batches per warm-up epoch. On a GPU a step takes milliseconds and the epoch's first
# steps are not (qflow-train's eager warm-up step, then the CUDA graph capture at the first full
# batch, Note [qflow-train --cuda-graphs]), so 8 would time mostly those: 100 (12,800 images) make
# them a small share, still erring slow as a real epoch captures once in 391 steps.
CPU_WARMUP_STEPS, GPU_WARMUP_STEPS = 8, 100


def with_option(flags, name, value=None):
    """`flags` with option `name` set to `value` (None: removed), each option given once."""
    out = list(flags)
    if name in out:
        at = out.index(name)
        del out[at:at + 2]
    return out + [name, str(value)] if value is not None else out


def gradient_bytes(checkpoint):
    """Bytes of gradient averaged per step: one float32 momentum buffer per parameter."""
    with open(checkpoint, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
               if k.startswith("optimizer.state.") and k.endswith(".momentum_buffer"))


class Speed:
    """What a warm-up measured for one kind of run (float or QAT)."""

    def __init__(self, train_images_per_s, eval_images_per_s, grad_bytes, seconds):
        self.train, self.eval, self.grad_bytes, self.seconds = train_images_per_s, eval_images_per_s, grad_bytes, seconds

    def epoch_seconds(self, train_images, test_images, machines=1, bandwidth=None):
        steps = math.ceil(train_images / launch.GLOBAL_BATCH)
        step = launch.GLOBAL_BATCH / (self.train * machines)
        if machines > 1:
            step += 2 * (machines - 1) / machines * self.grad_bytes / bandwidth
        return steps * step + test_images / (self.eval * machines)


def warm_up_command(args, n, config, out_dir, steps):
    """The warm-up's directory OUT/warmup/NAME and its qflow-train command (on --device, as the runs)."""
    wdir = os.path.join(out_dir, "warmup", config.name)
    train = min(steps * launch.GLOBAL_BATCH, args.subset or CIFAR_TRAIN)
    test = min(train, args.test_subset or CIFAR_TEST)
    flags = launch.run_flags(args, config, out_dir)
    flags = with_option(flags, "--qat-from")  # a fine-tune's step costs what a QAT step from scratch costs
    for name, value in (("--subset", train), ("--test-subset", test), ("--epochs", 3), ("--stop-after", 2)):
        flags = with_option(flags, name, value)
    return wdir, launch.command(args, n, flags, wdir)


def warm_up(args, n, config, out_dir, steps):
    """Runs the warm-up of `config` into OUT/warmup/NAME; returns its Speed."""
    wdir, cmd = warm_up_command(args, n, config, out_dir, steps)
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)
    test = min(steps * launch.GLOBAL_BATCH, args.subset or CIFAR_TRAIN, args.test_subset or CIFAR_TEST)
    start = time.time()
    with open(os.path.join(wdir, "train.txt"), "wb") as transcript:
        transcript.write(("$ " + " ".join(cmd) + "\n").encode())
        transcript.flush()
        status = subprocess.call(cmd, stdout=transcript, stderr=subprocess.STDOUT)
    wall = time.time() - start
    log = read_csv(os.path.join(wdir, "log.csv"))
    if status != 0 or len(log) < 2:
        with open(os.path.join(wdir, "train.txt"), errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
        raise SystemExit("reproduce-cifar10: the warm-up of {} failed (exit {}); the end of {}:\n{}".format(
            config.name, status, os.path.join(wdir, "train.txt"), tail))
    trained = sum(float(r["seconds"]) for r in log)
    evaluating = max(wall - trained, 1e-3)
    return Speed(float(log[1]["images_per_s"]), 2 * test / evaluating,
                 gradient_bytes(os.path.join(wdir, "last.safetensors")), wall)


def hours(seconds):
    if seconds < 120:
        return "{:.0f} s".format(seconds)
    if seconds < 7200:
        return "{:.0f} min".format(seconds / 60)
    days = " ({:.1f} days)".format(seconds / 86400) if seconds >= 2 * 86400 else ""
    return "{:.1f} h{}".format(seconds / 3600, days)


def cluster_lines(speeds, epochs, remaining, train_images, test_images, bandwidth_gbps, machines=(1, 2, 4, 8, 16, 32)):
    """The projection as aligned table lines: for each machine count, one whole run of each kind
    (`epochs[kind]` epochs) and the study's remaining work (`remaining`: (kind, epochs) pairs)."""
    bandwidth = bandwidth_gbps * 1e9 / 8
    rows = [("machines", "float run", "each QAT run", "remaining study")]
    for m in machines:
        epoch = {kind: speed.epoch_seconds(train_images, test_images, m, bandwidth) for kind, speed in speeds.items()}
        run = {kind: hours(epochs[kind] * epoch[kind]) if kind in epoch else "-" for kind in ("float", "qat")}
        rows.append((str(m), run["float"], run["qat"], hours(sum(e * epoch[kind] for kind, e in remaining))))
    width = [max(len(r[c]) for r in rows) for c in range(4)]
    rows.insert(1, tuple("-" * w for w in width))
    return ["  " + " | ".join(cell.rjust(w) for cell, w in zip(r, width)) for r in rows]
