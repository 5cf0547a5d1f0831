"""The command line of one qflow-train run of the study: the recipe's flags, the
configuration's, and mpirun's when the study runs data-parallel."""
import os
import re

GLOBAL_BATCH = 128  # the published recipe's batch: kept whatever the number of processes

# The published recipe, spelled out rather than left to qflow-train's defaults (which are the
# same today), so each run's flags say what it trained with.
RECIPE = ("--dataset", "cifar10", "--lr", "0.1", "--momentum", "0.9", "--weight-decay", "5e-4",
          "--schedule", "cosine", "--augment", "--seed", "0")


def hostfile_slots(path):
    """Processes a hostfile asks for: the sum of its slots= (every host line must give one)."""
    total = 0
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.search(r"\bslots\s*=\s*(\d+)", line)
            if not m:
                raise ValueError("{}:{}: '{}' gives no slots=K; give every host its slots or pass --np".format(
                    path, number, line))
            total += int(m.group(1))
    if total == 0:
        raise ValueError("{}: no hosts".format(path))
    return total


def processes(args):
    """How many qflow-train processes train each run (1: no mpirun)."""
    if args.np:
        return args.np
    if args.hostfile:
        return hostfile_slots(args.hostfile)
    return 1


def check_processes(n):
    if n < 1 or GLOBAL_BATCH % n:
        raise ValueError("{} processes: the global batch {} must split evenly, {} / N images per process "
                         "(N = 1, 2, 4, 8, 16, 32, 64 or 128)".format(n, GLOBAL_BATCH, GLOBAL_BATCH))


def uses_mpirun(args):
    return bool(args.np or args.hostfile)


def on_gpu(args):
    """--device names a GPU (cuda, cuda:N)."""
    return bool(getattr(args, "device", None)) and args.device != "cpu"


def mpirun_prefix(args, n):
    """mpirun and its flags, or nothing for a single process without --np/--hostfile."""
    if not uses_mpirun(args):
        return []
    cmd = ["mpirun", "-np", str(n)]
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")  # Open MPI refuses root otherwise
    if not args.hostfile and n > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")  # more processes than cores on this one machine
    return cmd


def run_flags(args, config, out_dir):
    """The flags that define a run (what a resumed run must repeat): recipe, data, model,
    schedule length, quantization and the user's extra flags. Not the per-process batch or the
    threads, which may change with the number of processes between sessions."""
    flags = list(RECIPE) + ["--data", args.data, "--model", args.model]
    if args.subset:
        flags += ["--subset", str(args.subset)]
    if args.test_subset:
        flags += ["--test-subset", str(args.test_subset)]
    if config.is_qat:
        flags += list(config.qat_flags) + ["--bn-fold", args.bn_fold]
    if config.is_qat and args.fine_tune:
        flags += ["--epochs", str(args.fine_tune), "--qat-from", os.path.join(out_dir, "float", "last.safetensors")]
        flags[flags.index("--lr") + 1] = str(args.fine_tune_lr)
    else:
        flags += ["--epochs", str(args.epochs)]
    return flags + list(args.extra)


def command(args, n, flags, checkpoint_dir, resume=False):
    """The whole command line: [mpirun ...] qflow-train FLAGS --batch-size 128/N ... [--device D].
    The device is not one of run_flags: checkpoints are the same on every device, so a run may
    continue on another one."""
    cmd = mpirun_prefix(args, n) + [args.qflow_train] + flags
    cmd += ["--batch-size", str(GLOBAL_BATCH // n), "--checkpoint-dir", checkpoint_dir]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if getattr(args, "device", None):
        cmd += ["--device", args.device]
    return cmd + (["--resume"] if resume else [])
