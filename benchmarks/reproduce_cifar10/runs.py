"""One run of the study on disk, OUT/NAME/: qflow-train's checkpoint directory plus the study's
own record, study.json (the run's flags, its sessions' wall-clock times, whether it finished).

A run is finished when qflow-train exited 0 with every epoch in log.csv (and, for QAT, its
results.csv written); it is resumed (qflow-train --resume) when last.safetensors exists; else it
starts afresh. Wall time is the sum of the sessions: a session killed without a word (SIGKILL,
power loss) is closed, when the study next starts, at the last write of the run's files (the
work that counted), so an interrupted study still reports honest times."""
import csv
import json
import os
import shutil
import subprocess
import sys
import time


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Run:
    def __init__(self, config, out_dir, flags, epochs):
        self.config, self.flags, self.epochs = config, flags, epochs
        self.dir = os.path.join(out_dir, config.name)
        self.state_file = os.path.join(self.dir, "study.json")
        self.state = self._load()

    # ---- state -------------------------------------------------------------------------------
    def _load(self):
        if not os.path.exists(self.state_file):
            return None
        with open(self.state_file) as f:
            return json.load(f)

    def _save(self):
        os.makedirs(self.dir, exist_ok=True)
        temp = self.state_file + ".tmp"
        with open(temp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(temp, self.state_file)  # whole or not at all, like qflow-train's files

    def check_flags(self):
        """A run already started must continue with the flags it started with."""
        if self.state and self.state["flags"] != self.flags:
            raise ValueError("{} was started with other settings:\n  then: {}\n  now:  {}\n"
                             "use another --out, or delete {} to start this run again".format(
                                 self.dir, " ".join(self.state["flags"]), " ".join(self.flags), self.dir))

    @property
    def done(self):
        """Finished with these flags (a run finished with others is not this study's)."""
        return bool(self.state and self.state.get("done") and self.state["flags"] == self.flags)

    @property
    def resumable(self):
        return os.path.exists(os.path.join(self.dir, "last.safetensors"))

    def log(self):
        return read_csv(os.path.join(self.dir, "log.csv"))

    def status(self):
        if self.done:
            return "finished"
        if self.resumable:
            return "resume after epoch {} of {}".format(len(self.log()), self.epochs)
        return "to do"

    def _close_killed_sessions(self):
        last_write = max((os.path.getmtime(os.path.join(self.dir, f)) for f in os.listdir(self.dir)
                          if f != "study.json"), default=0)
        for s in self.state["sessions"]:
            if s[1] is None:
                s[1] = max(s[0], min(last_write, time.time()))

    # ---- running -----------------------------------------------------------------------------
    def execute(self, command_for, processes, device="cpu"):
        """Runs (or resumes) qflow-train on `device`; its output goes to the terminal and
        OUT/NAME/train.txt. Returns qflow-train's exit status."""
        resume = self.resumable and self.state is not None
        if self.state is None or not resume:
            # Nothing to continue from (never started, or killed before its first checkpoint).
            shutil.rmtree(self.dir, ignore_errors=True)
            self.state = {"flags": self.flags, "sessions": [], "done": False}
        else:
            self._close_killed_sessions()
        self.state["processes"] = processes
        # Every device a session trained on, in order (a run may continue on another device).
        devices = self.state.setdefault("devices", [])
        if device not in devices:
            devices.append(device)
        self.state["sessions"].append([time.time(), None])
        self._save()
        cmd = command_for(self.dir, resume)
        with open(os.path.join(self.dir, "train.txt"), "ab") as transcript:
            transcript.write(("$ " + " ".join(cmd) + "\n").encode())
            status = stream(cmd, transcript)
        self.state["sessions"][-1][1] = time.time()
        self.state["done"] = status == 0 and self._complete()
        self._save()
        return status

    def _complete(self):
        epochs_logged = len(self.log()) >= self.epochs
        return epochs_logged and (not self.config.is_qat or os.path.exists(os.path.join(self.dir, "results.csv")))

    # ---- figures -----------------------------------------------------------------------------
    def devices(self):
        """The devices its sessions trained on, "cpu+cuda" when it moved; "cpu" for a run recorded
        before the study passed --device (qflow-train trained on the CPU by default)."""
        return "+".join(self.state.get("devices", ["cpu"])) if self.state else None

    def wall_seconds(self):
        return sum(end - start for start, end in self.state["sessions"] if end is not None) if self.state else 0.0

    def images_per_s(self):
        """Training images per second over the whole run (every process's images), from log.csv."""
        rows = self.log()
        seconds = sum(float(r["seconds"]) for r in rows)
        images = sum(float(r["images_per_s"]) * float(r["seconds"]) for r in rows)
        return images / seconds if seconds > 0 else None

    def results(self):
        """qflow-train's results.csv rows by stage (QAT runs), e.g. "QAT", "deploy (int8)"."""
        return {r["stage"]: r for r in read_csv(os.path.join(self.dir, "results.csv"))}


def stream(cmd, transcript):
    """Runs `cmd`, copying its output (stdout and stderr) to ours and to `transcript` as it
    comes. Ctrl-C reaches qflow-train too (same process group): it saves its state and exits
    130, and so does the study."""
    try:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError as e:
        raise SystemExit("reproduce-cifar10: cannot run {}: {}".format(cmd[0], e.strerror))
    while True:
        try:
            chunk = os.read(child.stdout.fileno(), 65536)
        except KeyboardInterrupt:
            continue  # keep copying until qflow-train has saved and exits
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        transcript.write(chunk)
        transcript.flush()
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue
